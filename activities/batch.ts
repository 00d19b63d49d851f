// The batch activity of a batched backfill: consecutive windows one after another, each exactly
// as the window activity processes one (its own transaction, done marker and run record), so the
// ledger's claim still decides every window. Progress is heartbeated with each window's outcome;
// a later attempt (the worker died) resumes after the last window it heard of, and windows done
// since then answer `already-done` from the ledger. Anything with follow-up work (effects or
// alerts to drive, a failure to retry and alert) is left to the window's own workflow.
import type { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { recordRun, runsOfEarlierAttempts } from '../db/ledger.js';
import type { BatchInput, BatchOutcome, BatchResult, WindowResult } from '../contract/workflows.js';
import type { ActivityDeps } from './deps.js';
import { noMetrics } from './metrics.js';
import { jobOrFail } from './plan.js';
import { windowActivities } from './window.js';
import { activityContext } from './context.js';
import { CRASH_POINT, reached } from './crash-points.js';

/** How often the batch tells Temporal it is alive (the SDK sends at most one per throttle interval). */
const BEAT_MS = 1_000;

/** The outcomes heartbeated by an earlier attempt of this batch, if they fit it. */
function resumed(ctx: Context | undefined, input: BatchInput): BatchOutcome[] {
  const details = ctx?.info.heartbeatDetails as { outcomes?: BatchOutcome[] } | undefined;
  const outcomes = Array.isArray(details?.outcomes) ? details.outcomes : [];
  const fits =
    outcomes.length <= input.windows.length && outcomes.every((o, i) => o.key === input.windows[i]!.key);
  return fits ? [...outcomes] : [];
}

const hasFollowUp = (r: WindowResult): boolean =>
  (r.effects?.length ?? 0) > 0 || (r.alerts?.length ?? 0) > 0 || (r.recovery?.length ?? 0) > 0;

const TIMED_OUT = Symbol('timed out');
const MAX_ERROR = 300;

/** Resolves to TIMED_OUT after `ms`; the window's own promise is left to end by itself (observed). */
async function within<T>(work: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  work.catch(() => undefined);
  try {
    return await Promise.race([
      work,
      new Promise<typeof TIMED_OUT>((r) => (timer = setTimeout(() => r(TIMED_OUT), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function batchActivities(deps: ActivityDeps) {
  const { processWindow } = windowActivities(deps);

  return {
    async processWindowBatch(input: BatchInput): Promise<BatchResult> {
      const job = jobOrFail(deps, input.job);
      // These need the window workflow itself: a preparer heartbeats its own details, a settle step
      // runs after the effects, allowed hours are waited for by the workflow.
      const perWindow = job.prepare
        ? 'it prepares each window (heartbeating its own progress)'
        : job.settle
          ? 'it settles each window after its effects'
          : job.allowedHours
            ? 'it runs only in its allowed hours'
            : null;
      if (perWindow)
        return { outcomes: [], perWindow: `job ${job.name} runs one window per run: ${perWindow}` };

      const ctx = activityContext();
      const outcomes = resumed(ctx, input);
      // Heartbeats are throttled (one per ~12 s reaches the server), so a later attempt (the worker
      // was lost) reads what the earlier ones did from the run records: windows they committed are
      // this batch's (processed, not already done); windows that failed in the batch go to their
      // own runs, not run again here; and the first window they did not finish is the one the
      // worker was lost in (windows run one after another): a window that kills its worker would
      // kill every worker the batch is retried on. It goes to its own run, whose attempts the
      // job's retry policy bounds, and its lost attempt is recorded.
      const info = ctx?.info;
      const earlier =
        info && info.attempt > 1 && info.workflowExecution
          ? await runsOfEarlierAttempts(
              deps.db,
              input.job,
              input.windows.slice(outcomes.length).map((w) => new Date(w.start)),
              {
                workflowId: info.workflowExecution.workflowId,
                beforeAttempt: info.attempt,
                since: new Date(info.scheduledTimestampMs),
              },
            )
          : null;
      const lostIn = earlier
        ? input.windows.slice(outcomes.length).find((w) => !earlier.has(Date.parse(w.start)))?.key
        : undefined;
      const ranBefore = (w: BatchInput['windows'][number], outcome: string) =>
        earlier?.get(Date.parse(w.start))?.has(outcome) ?? false;
      // A run record only: the window's row is left to its own run (an upsert on it would wait for
      // any transaction still holding it, such as the lost attempt's, on a worker not yet dead).
      const recordLost = async (w: BatchInput['windows'][number], reason: string): Promise<void> => {
        const at = deps.now();
        await recordRun(deps.db, {
          kind: 'window',
          job: input.job,
          windowStart: new Date(w.start),
          generation: w.generation,
          workflowId: info?.workflowExecution?.workflowId ?? null,
          attempt: (info?.attempt ?? 2) - 1,
          startedAt: at,
          finishedAt: at,
          outcome: 'failed',
          reason,
        }).catch(() => undefined);
        const attempt = (info?.attempt ?? 2) - 1;
        deps.logger.error(`FAILED job=${input.job} window=${w.key} attempt=${attempt}: ${reason}`, {
          job: input.job,
          window: w.key,
          generation: w.generation,
          outcome: 'failed',
          attempt,
          reason,
        });
        (deps.metrics ?? noMetrics).window({ job: input.job, outcome: 'failed', reason: 'worker-lost' });
      };
      const beat = () => ctx?.heartbeat({ outcomes });
      beat();
      const timer = setInterval(beat, BEAT_MS);
      try {
        for (let i = outcomes.length; i < input.windows.length; i++) {
          if (ctx?.cancellationSignal.aborted) throw new CancelledFailure('the batch was cancelled');
          const w = input.windows[i]!;
          let outcome: BatchOutcome;
          if (w.key === lostIn || (ranBefore(w, 'failed') && !ranBefore(w, 'processed'))) {
            const error =
              w.key === lostIn
                ? `attempt ${info!.attempt - 1} of this batch ended (its worker lost) before window ${w.key} was done`
                : `window ${w.key} failed in an earlier attempt of this batch`;
            if (w.key === lostIn) await recordLost(w, error);
            outcomes.push({ key: w.key, outcome: 'failed', error });
            beat();
            continue;
          }
          try {
            const r = await within(
              processWindow({
                ...w,
                trigger: input.trigger,
                policy: input.policy,
                ...(input.asOf ? { asOf: input.asOf } : {}),
              }),
              input.policy.startToCloseTimeoutMs,
            );
            if (r === TIMED_OUT) {
              // Its transaction may still be running: stop here, the rest go back to the backfill.
              outcomes.push({
                key: w.key,
                outcome: 'failed',
                error: `window ${w.key} took longer than its attempt timeout (${input.policy.startToCloseTimeoutMs} ms) in a batch`,
              });
              for (const rest of input.windows.slice(i + 1))
                outcomes.push({ key: rest.key, outcome: 'not-run' });
              break;
            }
            outcome = {
              key: w.key,
              outcome: r.outcome === 'already-done' && ranBefore(w, 'processed') ? 'processed' : r.outcome,
              ...(hasFollowUp(r) ? { followUp: true } : {}),
            };
          } catch (err) {
            // Recorded as a failed attempt by the window activity; its own workflow retries and alerts it.
            // (Redacted there; cut short here, as the outcomes travel in every heartbeat.)
            const error = (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR);
            outcome = { key: w.key, outcome: 'failed', error };
          }
          // Heartbeated by the timer: a beat encodes every outcome so far and crosses into the SDK's
          // core (a batch's beats grew with the square of its windows), and a later attempt reads
          // the run records anyway.
          outcomes.push(outcome);
          if (outcome.outcome === 'processed') await reached(deps, CRASH_POINT.inBatch, w.key);
        }
      } finally {
        clearInterval(timer);
      }
      return { outcomes };
    },
  };
}
