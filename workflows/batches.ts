// A batched backfill page: lanes take consecutive windows a batch at a time and run them in one
// activity (processWindowBatch), each window in its own transaction. A window with follow-up work
// (effects or alerts to drive, a failure to retry and alert) is handed to today's path, its own
// window workflow, which retries with the job's full policy, alerts, or finds it done and drives
// what is left; so the guarantee stays the ledger's. Lanes that are idle pick up follow-ups.
import { ActivityFailure, ChildWorkflowFailure } from '@temporalio/common';
import { condition, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { startWindow } from './children.js';
import { BAD_INPUT } from '../contract/failures.js';
import type {
  ActivityPolicy,
  BackfillTotals,
  BatchOutcome,
  BatchResult,
  WindowSpec,
} from '../contract/workflows.js';

/**
 * A batch that stops heartbeating this long (its worker died) is retried elsewhere, resuming after
 * the last window it reported. Heartbeats go out every second while a window runs.
 */
export const BATCH_HEARTBEAT_MS = 15_000;

/** The batch activity, with a summary the Web UI shows on its events. */
function batchActivity(policy: ActivityPolicy, windows: readonly WindowSpec[]) {
  return proxyActivities<Activities>({
    // Each window is bounded by its own attempt timeout inside the batch; this is the backstop.
    startToCloseTimeout: policy.startToCloseTimeoutMs * windows.length,
    heartbeatTimeout: BATCH_HEARTBEAT_MS,
    // The batch's own retries are for lost workers; a window's failure is an outcome, not a retry.
    retry: {
      maximumAttempts: 10,
      initialInterval: '1s',
      maximumInterval: '30s',
      nonRetryableErrorTypes: [...BAD_INPUT],
    },
    summary: `${windows.length} windows [${windows[0]!.start}, ${windows.at(-1)!.end})`,
  });
}

type Prior = BatchOutcome['outcome'];

export interface BatchedPage {
  readonly job: string;
  readonly windows: readonly WindowSpec[];
  readonly policy: ActivityPolicy;
  readonly batch: number;
  readonly concurrency: number;
  readonly totals: BackfillTotals;
  /** Windows started (+n) or ended (-n); the backfill shows it. */
  readonly moved: (inFlightDelta: number) => void;
  /** The job cannot be batched (the reason): the rest of its windows run one workflow each. */
  readonly unbatched: (reason: string) => void;
}

export async function runBatchedPage(p: BatchedPage): Promise<void> {
  const { totals } = p;
  const queue = [...p.windows];
  const followUps: { w: WindowSpec; prior: Prior }[] = [];
  let batchesRunning = 0;
  let perWindow = false;

  /** Today's path for one window; `prior` is what the batch did with it, if it got to it. */
  async function windowRun(w: WindowSpec, prior: Prior): Promise<void> {
    p.moved(1);
    try {
      const started = await startWindow(
        w,
        'backfill',
        p.policy,
        prior === 'processed' ? { afterBatch: true } : {},
      );
      if (!started.handle) {
        // Another run of the window is driving it (its effects too).
        if (prior === 'processed') totals.processed++;
        else if (prior === 'already-done') totals.alreadyDone++;
        else totals.running++;
        return;
      }
      const result = await started.handle.result();
      if (result.outcome === 'processed' || prior === 'processed') totals.processed++;
      else totals.alreadyDone++;
    } catch (err) {
      if (!(err instanceof ChildWorkflowFailure)) throw err;
      totals.failed.push(w.key);
    } finally {
      p.moved(-1);
    }
  }

  async function runBatch(windows: WindowSpec[]): Promise<void> {
    batchesRunning++;
    p.moved(windows.length);
    try {
      let result: BatchResult;
      try {
        result = await batchActivity(p.policy, windows).processWindowBatch({
          job: p.job,
          windows,
          policy: p.policy,
          trigger: 'backfill',
          asOf: new Date().toISOString(),
        });
      } catch (err) {
        if (!(err instanceof ActivityFailure)) throw err;
        // The batch itself kept failing (its windows' failures are outcomes): one run per window.
        for (const w of windows) followUps.push({ w, prior: 'not-run' });
        return;
      }
      if (result.perWindow) {
        perWindow = true;
        p.unbatched(result.perWindow);
        queue.unshift(...windows);
        return;
      }
      const outcomes = new Map(result.outcomes.map((o) => [o.key, o]));
      const notRun: WindowSpec[] = [];
      for (const w of windows) {
        const o = outcomes.get(w.key);
        // A window the batch did not answer for runs as its own workflow: none may be dropped.
        if (!o) followUps.push({ w, prior: 'not-run' });
        else if (o.outcome === 'not-run') notRun.push(w);
        else if (o.outcome === 'failed' || o.followUp) followUps.push({ w, prior: o.outcome });
        else if (o.outcome === 'processed') totals.processed++;
        else totals.alreadyDone++;
      }
      queue.unshift(...notRun);
    } finally {
      batchesRunning--;
      p.moved(-windows.length);
    }
  }

  async function lane(): Promise<void> {
    for (;;) {
      const f = followUps.shift();
      if (f) await windowRun(f.w, f.prior);
      else if (queue.length > 0 && perWindow) await windowRun(queue.shift()!, 'not-run');
      else if (queue.length > 0) await runBatch(queue.splice(0, p.batch));
      else if (batchesRunning === 0) return;
      // A batch still running may hand out follow-ups or give windows back.
      else await condition(() => followUps.length > 0 || queue.length > 0 || batchesRunning === 0);
    }
  }
  await Promise.all(Array.from({ length: p.concurrency }, lane));
}
