// Custom search attributes on every tidemark workflow, so the Web UI can filter executions by
// job, window and kind: e.g. `TidemarkJob = "sales-hourly" AND TidemarkKind = "window"`.
import { defineSearchAttributeKey, SearchAttributeType, type SearchAttributePair } from '@temporalio/common';

export const SA_JOB = defineSearchAttributeKey('TidemarkJob', SearchAttributeType.KEYWORD);
export const SA_WINDOW_START = defineSearchAttributeKey('TidemarkWindowStart', SearchAttributeType.DATETIME);
export const SA_GENERATION = defineSearchAttributeKey('TidemarkGeneration', SearchAttributeType.INT);
export const SA_KIND = defineSearchAttributeKey('TidemarkKind', SearchAttributeType.KEYWORD);

export const SEARCH_ATTRIBUTES = [SA_JOB, SA_WINDOW_START, SA_GENERATION, SA_KIND] as const;

export type RunKindName = 'tick' | 'window' | 'backfill' | 'rerun' | 'watch';

export function searchAttributes(
  kind: RunKindName,
  job: string | null,
  window?: { start: string; generation: number },
): SearchAttributePair[] {
  return [
    { key: SA_KIND, value: kind },
    ...(job ? [{ key: SA_JOB, value: job }] : []),
    ...(window
      ? [
          { key: SA_WINDOW_START, value: new Date(window.start) },
          { key: SA_GENERATION, value: window.generation },
        ]
      : []),
  ] as SearchAttributePair[];
}
