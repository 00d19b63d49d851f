// backfill: every closed window of a time range, oldest first, a bounded number at once;
// windows already done are skipped. Continues as new every page to keep its history small.
// With `batch`, consecutive windows run batch by batch in one activity each (workflows/batches.ts).
import { ChildWorkflowFailure } from '@temporalio/common';
import {
  continueAsNew,
  defineQuery,
  setCurrentDetails,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { runBatchedPage } from './batches.js';
import { startWindow } from './children.js';
import { bookkeeping } from './policy.js';
import {
  MAX_BATCH,
  type BackfillInput,
  type BackfillProgress,
  type BackfillResult,
  type BackfillTotals,
  type WindowSpec,
} from '../contract/workflows.js';

/** Windows planned per run before continuing as new (about 8 history events each). */
export const BACKFILL_PAGE = 500;
/**
 * Batched, a page holds four batches for every lane (a batch is ~3 events): lanes pull batches
 * until the page is done, and each page ends with every lane waiting for the last batch, then the
 * next page's plan and a new run, during which nothing is processed. At one batch a lane those
 * waits were about 40% of a year's backfill (bench: 1,200 against 2,000 windows/s in one page).
 * The planned page is one activity result and must stay well under Temporal's 2 MiB limit for
 * one: half of it, by what a window's spec weighs (its job's name twice, in `job` and `key`).
 */
export const BATCHES_PER_LANE = 4;
export const PAGE_BYTES = 1_048_576;

/** Windows planned per page of a batched backfill of `job`. */
export function batchedPageSize(job: string, batch: number, concurrency: number): number {
  const specBytes = 2 * job.length + 120;
  return Math.min(
    Math.floor(PAGE_BYTES / specBytes),
    Math.max(BACKFILL_PAGE, batch * concurrency * BATCHES_PER_LANE),
  );
}
export const progressQuery = defineQuery<BackfillProgress>('progress');

/** What the Web UI shows on the run (its current details): where the backfill is. */
function details(
  input: BackfillInput,
  t: BackfillTotals,
  s: { cursor: string; inFlight: number; batch: number; unbatched: string | null },
): string {
  const mode = s.unbatched
    ? `one window per run (${s.unbatched})`
    : s.batch
      ? `batches of up to ${s.batch} windows`
      : 'one window per run';
  return [
    `**Backfill of ${input.job}**, windows starting in [${input.from}, ${input.to}), ${mode}`,
    '',
    `processed ${t.processed}, already done ${t.alreadyDone}, running elsewhere ${t.running}, failed ${t.failed.length}; ${s.inFlight} in flight`,
    '',
    `this page from ${s.cursor}${t.failed.length ? `; failed: ${t.failed.slice(0, 20).join(', ')}` : ''}`,
  ].join('\n');
}

export async function backfill(input: BackfillInput): Promise<BackfillResult> {
  const totals: BackfillTotals = input.totals
    ? { ...input.totals, failed: [...input.totals.failed] }
    : { processed: 0, alreadyDone: 0, running: 0, failed: [] };
  const startedAt = input.startedAt ?? new Date().toISOString();
  const cursor = input.cursor ?? input.from;
  const concurrency = Math.max(1, Math.floor(input.concurrency ?? 8));
  const batch = input.batch === undefined ? 0 : Math.min(MAX_BATCH, Math.max(1, Math.floor(input.batch)));
  let inFlight = 0;
  let unbatched: string | null = null;
  // Not a command: the Web UI reads it with the workflow metadata query, so no history changes.
  const show = () => setCurrentDetails(details(input, totals, { cursor, inFlight, batch, unbatched }));
  setHandler(progressQuery, () => ({
    ...totals,
    failed: [...totals.failed],
    cursor,
    inFlight,
    ...(batch ? { batch } : {}),
  }));
  show();

  const page = await bookkeeping.planBackfill({
    job: input.job,
    from: cursor,
    to: input.to,
    limit: input.pageSize ?? (batch ? batchedPageSize(input.job, batch, concurrency) : BACKFILL_PAGE),
  });
  totals.alreadyDone += page.alreadyDone;
  show();
  const queue: WindowSpec[] = [...page.windows];

  async function lane(): Promise<void> {
    for (let w = queue.shift(); w; w = queue.shift()) {
      inFlight++;
      try {
        const started = await startWindow(w, 'backfill', page.policy);
        if (!started.handle) {
          totals.running++;
          continue;
        }
        const result = await started.handle.result();
        if (result.outcome === 'processed') totals.processed++;
        else totals.alreadyDone++;
      } catch (err) {
        if (!(err instanceof ChildWorkflowFailure)) throw err;
        totals.failed.push(w.key);
      } finally {
        inFlight--;
        show();
      }
    }
  }
  if (batch) {
    await runBatchedPage({
      job: input.job,
      windows: page.windows,
      policy: page.policy,
      batch,
      concurrency,
      totals,
      moved: (delta) => {
        inFlight += delta;
        show();
      },
      unbatched: (reason) => {
        unbatched = reason;
        show();
      },
    });
  } else {
    await Promise.all(Array.from({ length: concurrency }, lane));
  }

  if (page.next) {
    await continueAsNew<typeof backfill>({ ...input, cursor: page.next, totals, startedAt });
  }
  const result: BackfillResult = { job: input.job, from: input.from, to: input.to, ...totals };
  await bookkeeping.recordBackfill({ result, startedAt, workflowId: workflowInfo().workflowId });
  return result;
}
