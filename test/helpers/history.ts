// Workflow histories for replay tests: read a history saved as JSON (`temporal workflow show -o json`).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { temporal } from '@temporalio/proto';

/** The SDK's historyFromJSON pairs two copies of protobufjs here; parse with @temporalio/proto's own. */
export async function historyFromFile(url: URL): Promise<temporal.api.history.v1.IHistory> {
  const json: unknown = JSON.parse(await readFile(url, 'utf8'));
  const require = createRequire(import.meta.url);
  const fromProto = createRequire(require.resolve('@temporalio/proto'));
  const { fromJson } = fromProto('protobufjs/ext/protojson') as {
    fromJson: (type: unknown, json: unknown, options: object) => unknown;
  };
  const { patchProtobufRoot } = require('@temporalio/proto/lib/patch-protobuf-root') as {
    patchProtobufRoot: (root: unknown) => { lookupType(name: string): unknown };
  };
  const root = patchProtobufRoot(require('@temporalio/proto'));
  return fromJson(root.lookupType('temporal.api.history.v1.History'), json, {
    ignoreUnknownFields: true,
  }) as temporal.api.history.v1.IHistory;
}
