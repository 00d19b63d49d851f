// The batch activity of a batched backfill: consecutive windows, committed in groups (windowGroups:
// a group's claims in one statement, each window's handler, the group's finishes in one statement
// carrying the COMMIT), each window getting what its own transaction would give it (its done
// marker, run record, counts and effects), so the ledger's claim still decides every window. A
// group that fails rolls back whole, and its windows run one transaction each (the window
// activity's own path), so a failure stays the failing window's. Progress is heartbeated with each
// window's outcome; a later attempt (the worker died) resumes after the last window it heard of,
// and windows done since then answer `already-done` from the ledger.
// Anything with follow-up work (effects or alerts to drive, a failure to retry and alert) is left
// to the window's own workflow.
import type { Context } from '@temporalio/activity';
import { CancelledFailure } from '@temporalio/common';
import { recordRun, runsOfEarlierAttempts } from '../db/ledger.js';
import { redactError } from './errors.js';
import { noMetrics } from './metrics.js';
import type {
  BatchInput,
  BatchOutcome,
  BatchResult,
  WindowInput,
  WindowResult,
} from '../contract/workflows.js';
import type { ActivityDeps } from './deps.js';
import { jobOrFail } from './plan.js';
import { windowActivities } from './window.js';
import { windowGroups } from './window-group.js';
import { activityContext } from './context.js';
import { CRASH_POINT, reached } from './crash-points.js';

/** How often the batch tells Temporal it is alive (the SDK sends at most one per throttle interval). */
const BEAT_MS = 1_000;

/** The first group's windows; the next groups are sized from the time a window took. */
const GROUP_FIRST = 4;
const GROUP_MAX = 32;
/** A group holds its windows' rows (and their handlers' locks) this long at most, about. */
const GROUP_TARGET_MS = 250;

/** The next group's size: what fits the target at the last group's pace, well within an attempt. */
export function nextGroupSize(size: number, msPerWindow: number, attemptMs: number): number {
  const target = Math.min(GROUP_TARGET_MS, attemptMs / 8);
  const fits = Math.floor(target / Math.max(msPerWindow, 0.01));
  // Grows at most twofold a group: one fast group says little of the next.
  return Math.max(1, Math.min(GROUP_MAX, 2 * size, fits));
}

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
  const { processGroup } = windowGroups(deps);

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
      // own runs, not run again here. The worker was lost in the group that began at the first
      // window they did not finish (groups commit one after another), and any window of that group
      // may have killed it: a window that kills its worker would kill every worker the batch is
      // retried on. None is blamed; each window the group may have held (up to GROUP_MAX) goes to
      // its own run, whose attempts the job's retry policy bounds.
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
      const ranBefore = (w: BatchInput['windows'][number], outcome: string) =>
        earlier?.get(Date.parse(w.start))?.has(outcome) ?? false;
      const lostGroup = new Map<string, string>();
      const lostFrom = earlier
        ? input.windows.findIndex((w, i) => i >= outcomes.length && !earlier.has(Date.parse(w.start)))
        : -1;
      if (lostFrom >= 0) {
        const lostAttempt = info!.attempt - 1;
        const from = input.windows[lostFrom]!.key;
        for (const w of input.windows.slice(lostFrom, lostFrom + GROUP_MAX))
          if (!earlier!.has(Date.parse(w.start)))
            lostGroup.set(
              w.key,
              `attempt ${lostAttempt} of this batch ended (its worker lost) in a group of windows from ${from}, which may have held this one: it goes to its own run`,
            );
        deps.logger.warn(
          `BATCH job=${input.job}: attempt ${lostAttempt} of this batch ended (its worker lost) in a group of windows from ${from}; the ${lostGroup.size} window(s) it may have held go to their own runs`,
          { job: input.job, window: from, attempt: lostAttempt, reason: 'worker-lost' },
        );
        // On record, so that a later attempt of the batch (this one lost too) hands them over
        // again instead of taking them for the group it was lost in. A run record only: the
        // window's row is left to its own run (an upsert on it would wait for any transaction still
        // holding it, such as the lost attempt's, on a worker not yet dead).
        for (const [key, reason] of lostGroup) {
          const w = input.windows.find((x) => x.key === key)!;
          const at = deps.now();
          await recordRun(deps.db, {
            kind: 'window',
            job: input.job,
            windowStart: new Date(w.start),
            generation: w.generation,
            workflowId: info?.workflowExecution?.workflowId ?? null,
            attempt: lostAttempt,
            startedAt: at,
            finishedAt: at,
            outcome: 'failed',
            reason,
          }).catch(() => undefined);
          deps.logger.error(`FAILED job=${input.job} window=${key} attempt=${lostAttempt}: ${reason}`, {
            job: input.job,
            window: key,
            generation: w.generation,
            outcome: 'failed',
            attempt: lostAttempt,
            reason,
          });
          (deps.metrics ?? noMetrics).window({ job: input.job, outcome: 'failed', reason: 'worker-lost' });
        }
      }
      const beat = () => ctx?.heartbeat({ outcomes });
      const inputOf = (w: BatchInput['windows'][number]): WindowInput => ({
        ...w,
        trigger: input.trigger,
        policy: input.policy,
        ...(input.asOf ? { asOf: input.asOf } : {}),
      });
      const attemptMs = input.policy.startToCloseTimeoutMs;

      /** Window `i` in a transaction of its own; false: the batch stops here (it outlived its attempt). */
      const runOne = async (i: number): Promise<boolean> => {
        const w = input.windows[i]!;
        let outcome: BatchOutcome;
        const lost = lostGroup.get(w.key);
        if (lost) {
          outcomes.push({ key: w.key, outcome: 'failed', error: lost });
          return true;
        }
        if (ranBefore(w, 'failed') && !ranBefore(w, 'processed')) {
          outcomes.push({
            key: w.key,
            outcome: 'failed',
            error: `window ${w.key} failed in an earlier attempt of this batch`,
          });
          beat();
          return true;
        }
        try {
          const r = await within(processWindow(inputOf(w)), attemptMs);
          if (r === TIMED_OUT) {
            // Its transaction may still be running: stop here, the rest go back to the backfill.
            outcomes.push({
              key: w.key,
              outcome: 'failed',
              error: `window ${w.key} took longer than its attempt timeout (${attemptMs} ms) in a batch`,
            });
            for (const rest of input.windows.slice(i + 1))
              outcomes.push({ key: rest.key, outcome: 'not-run' });
            return false;
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
        return true;
      };

      /**
       * Windows `i`.. in one transaction (windowGroups): how many it answered for; 0 when the group
       * failed, rolled back whole (its windows then run one by one); -1: the batch stops here.
       */
      const runGroup = async (i: number, size: number): Promise<number> => {
        const group = input.windows.slice(i, i + size);
        let results: Map<string, WindowResult> | typeof TIMED_OUT;
        try {
          results = await within(processGroup(group.map(inputOf)), attemptMs * group.length);
        } catch (err) {
          // Its windows now run one by one, and the failing one's own run records and alerts it.
          const reason = redactError(err, deps.redact ?? ((t: string) => t)).slice(0, MAX_ERROR);
          deps.logger.warn(
            `BATCH job=${input.job}: the group of ${group.length} windows from ${group[0]!.key} rolled back (${reason}); its windows run one by one`,
            { job: input.job, window: group[0]!.key, reason },
          );
          return 0;
        }
        if (results === TIMED_OUT) {
          // It may still commit: each of its windows goes to its own run, which finds it done or runs it.
          for (const w of group)
            outcomes.push({
              key: w.key,
              outcome: 'failed',
              error: `the group of ${group.length} windows from ${group[0]!.key} took longer than their attempt timeouts (${group.length} x ${attemptMs} ms) in a batch`,
            });
          for (const rest of input.windows.slice(i + size))
            outcomes.push({ key: rest.key, outcome: 'not-run' });
          return -1;
        }
        for (const [k, w] of group.entries()) {
          const r = results.get(w.key);
          // Found done by the claim: its own path answers it (what is left to drive, its skip record).
          if (!r) {
            if (!(await runOne(i + k))) return -1;
            continue;
          }
          outcomes.push({ key: w.key, outcome: 'processed', ...(hasFollowUp(r) ? { followUp: true } : {}) });
          await reached(deps, CRASH_POINT.inBatch, w.key);
        }
        return group.length;
      };

      beat();
      const timer = setInterval(beat, BEAT_MS);
      try {
        let size = GROUP_FIRST;
        // A window an earlier attempt of this batch touched runs alone: its records answer for it.
        const fresh = (w: BatchInput['windows'][number]) =>
          !lostGroup.has(w.key) && !earlier?.has(Date.parse(w.start));
        for (let i = outcomes.length; i < input.windows.length;) {
          if (ctx?.cancellationSignal.aborted) throw new CancelledFailure('the batch was cancelled');
          let plain = 0;
          while (plain < size && i + plain < input.windows.length && fresh(input.windows[i + plain]!))
            plain++;
          if (plain > 1) {
            const began = performance.now();
            const answered = await runGroup(i, plain);
            if (answered < 0) break;
            if (answered > 0) {
              i += answered;
              size = nextGroupSize(plain, (performance.now() - began) / answered, attemptMs);
              continue;
            }
            // The group rolled back: its windows one by one, then groups again from the first size.
            for (const end = i + plain; i < end; i++) {
              if (ctx?.cancellationSignal.aborted) throw new CancelledFailure('the batch was cancelled');
              if (!(await runOne(i))) return { outcomes };
            }
            size = GROUP_FIRST;
            continue;
          }
          if (!(await runOne(i))) break;
          i++;
        }
      } finally {
        clearInterval(timer);
      }
      return { outcomes };
    },
  };
}
