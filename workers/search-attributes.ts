// Registers tidemark's search attributes on a namespace (the dev server, a cluster, a test
// server). Idempotent: attributes that exist already are left as they are.
import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../contract/search-attributes.js';

const TYPES = {
  KEYWORD: proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  DATETIME: proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
  INT: proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_INT,
} as const;

export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = SEARCH_ATTRIBUTES.filter((k) => !have.has(k.name));
  if (missing.length === 0) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((k) => [k.name, TYPES[k.type as keyof typeof TYPES]])),
  });
  return missing.map((k) => k.name);
}
