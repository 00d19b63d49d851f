// backfill: every closed window of a time range, oldest first, a bounded number at once;
// windows already done are skipped. Continues as new every page to keep its history small.
import { ChildWorkflowFailure } from '@temporalio/common';
import { continueAsNew, defineQuery, setHandler, workflowInfo } from '@temporalio/workflow';
import { startWindow } from './children.js';
import { bookkeeping } from './policy.js';
import type { BackfillInput, BackfillProgress, BackfillResult, BackfillTotals, WindowSpec } from './types.js';

/** Windows planned per run before continuing as new (about 8 history events each). */
export const BACKFILL_PAGE = 500;
export const progressQuery = defineQuery<BackfillProgress>('progress');

export async function backfill(input: BackfillInput): Promise<BackfillResult> {
  const totals: BackfillTotals = input.totals
    ? { ...input.totals, failed: [...input.totals.failed] }
    : { processed: 0, alreadyDone: 0, running: 0, failed: [] };
  const startedAt = input.startedAt ?? new Date().toISOString();
  const cursor = input.cursor ?? input.from;
  const concurrency = Math.max(1, Math.floor(input.concurrency ?? 8));
  let inFlight = 0;
  setHandler(progressQuery, () => ({ ...totals, failed: [...totals.failed], cursor, inFlight }));

  const page = await bookkeeping.planBackfill({
    job: input.job,
    from: cursor,
    to: input.to,
    limit: input.pageSize ?? BACKFILL_PAGE,
  });
  totals.alreadyDone += page.alreadyDone;
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
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, lane));

  if (page.next) {
    await continueAsNew<typeof backfill>({ ...input, cursor: page.next, totals, startedAt });
  }
  const result: BackfillResult = { job: input.job, from: input.from, to: input.to, ...totals };
  await bookkeeping.recordBackfill({ result, startedAt, workflowId: workflowInfo().workflowId });
  return result;
}
