// Workflow histories for replay tests: read a history saved as JSON (`temporal workflow show -o json`).
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Payload } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';

/** @temporalio/proto's protojson and History type (the SDK's own helpers pair two copies of protobufjs). */
function protoJson() {
  const require = createRequire(import.meta.url);
  const fromProto = createRequire(require.resolve('@temporalio/proto'));
  const json = fromProto('protobufjs/ext/protojson') as {
    fromJson: (type: unknown, json: unknown, options: object) => unknown;
    toJson: (type: unknown, message: unknown) => unknown;
  };
  const { patchProtobufRoot } = require('@temporalio/proto/lib/patch-protobuf-root') as {
    patchProtobufRoot: (root: unknown) => {
      lookupType(name: string): { fromObject(value: unknown): unknown };
    };
  };
  const root = patchProtobufRoot(require('@temporalio/proto'));
  return { ...json, History: root.lookupType('temporal.api.history.v1.History') };
}

/** A history saved as JSON (`temporal workflow show -o json`, or historyToJson below). */
export async function historyFromFile(url: URL): Promise<temporal.api.history.v1.IHistory> {
  const json: unknown = JSON.parse(await readFile(url, 'utf8'));
  const { fromJson, History } = protoJson();
  return fromJson(History, json, { ignoreUnknownFields: true }) as temporal.api.history.v1.IHistory;
}

/** A fetched history (handle.fetchHistory()) as the JSON `temporal workflow show -o json` writes. */
export function historyToJson(history: temporal.api.history.v1.IHistory): unknown {
  const { toJson, History } = protoJson();
  return toJson(History, History.fromObject(history));
}

/** Every string and byte string anywhere in `value` (bytes as latin1), one text to search. */
export function allText(value: unknown, out: string[] = [], seen = new Set<object>()): string {
  if (typeof value === 'string') out.push(value);
  else if (value instanceof Uint8Array) out.push(Buffer.from(value).toString('latin1'));
  else if (value && typeof value === 'object' && !seen.has(value)) {
    seen.add(value);
    for (const v of Object.values(value)) allText(v, out, seen);
  }
  return out.join('\n');
}

/**
 * Every payload anywhere in `value` (an object with metadata and data) but search attributes: they stay in
 * clear by design (the visibility store indexes them: window keys, job names, statuses; no business values,
 * which the text search checks). With `skipCoreMarkers`, also past what the SDK core writes itself, past any
 * codec: a patch marker (a patch id such as "window-local-activity") and a local activity marker's `data`
 * (activity id, type, attempt, times); the local activity's result is encrypted like the rest.
 */
export function payloadsIn(value: unknown, opts: { skipCoreMarkers?: boolean } = {}): Payload[] {
  const out: Payload[] = [];
  const seen = new Set<object>();
  const walk = (value: unknown): void => {
    if (!value || typeof value !== 'object' || value instanceof Uint8Array || seen.has(value)) return;
    seen.add(value);
    const v = value as { metadata?: unknown; data?: unknown; markerName?: string; details?: object };
    if (opts.skipCoreMarkers) {
      if (v.markerName === 'core_patch') return;
      if (v.markerName === 'core_local_activity' && v.details) {
        for (const [k, x] of Object.entries(v.details)) if (k !== 'data') walk(x);
        return;
      }
    }
    if (v.metadata && typeof v.metadata === 'object' && v.data instanceof Uint8Array) out.push(v as Payload);
    else for (const [k, x] of Object.entries(value)) if (k !== 'searchAttributes') walk(x);
  };
  walk(value);
  return out;
}
