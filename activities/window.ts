// The window activity: the job's handler, the window's done marker and the watermark advance,
// committed in one transaction. Two attempts racing produce one effect; the loser reports
// `already-done` and changes nothing.
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE } from '../contract/failures.js';
import { previewLines } from '../contract/preview-text.js';
import { windowAttributes } from '../contract/span-attributes.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import type { WindowInput, WindowResult } from '../contract/workflows.js';
import { listEffects, openEffectsOfWindow } from '../db/effects.js';
import { failAttempt, finishWindow, isDone, recordRun, startLocalAttempt } from '../db/ledger.js';
import { undeliveredNoticesOfWindow } from '../db/notices.js';
import { alerting, type AlertDeliveries } from './alerts.js';
import { attemptInfo, heartbeater } from './context.js';
import { CRASH_POINT, reached } from './crash-points.js';
import type { ActivityDeps } from './deps.js';
import { badInput, redactError } from './errors.js';
import { failureReason, noMetrics } from './metrics.js';
import { diff, previewDigest, snapshot } from './preview.js';
import { activitySpan } from './tracing.js';
import { resolveWindow } from './window-input.js';
import { changeOf, previewActivity, replaced } from './window-preview.js';
import { inWindowTransaction } from './window-transaction.js';
import { windowCommit } from './window-commit.js';

/** The fields every outcome line carries besides its text. */
function outcomeFields(w: { job: string; key: string; generation: number }, outcome: string) {
  return { job: w.job, window: w.key, generation: w.generation, outcome };
}

/** The incident subject of a window's settle step (apart from the window's own failures). */
export const settleSubject = (windowKey: string): string => `${windowKey}:settle`;

export function windowActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  const redact = deps.redact ?? ((t: string) => t);
  const alerts = alerting(deps);
  const commit = windowCommit(deps);

  const activities = {
    previewWindow: previewActivity(deps),
    /**
     * Lets the job read what its effects' providers answered and record it. A failure is
     * redacted before it is thrown (the workflow alerts it); a success clears its incident.
     */
    async settleWindow(input: WindowInput): Promise<AlertDeliveries | null> {
      const w = resolveWindow(deps, input);
      const job = deps.catalog.get(w.job);
      if (!job.settle) return null;
      try {
        await job.settle({
          db: db.withoutPlugins(),
          ledger: db,
          job,
          window: { start: w.start, end: w.end },
          key: w.key,
          generation: w.generation,
          effects: await listEffects(db, { windowKey: w.key }),
        });
      } catch (err) {
        const reason = redactError(err, deps.redact ?? ((t: string) => t));
        const attempt = attemptInfo().attempt;
        logger.error(`FAILED job=${w.job} window=${w.key} step=settle attempt=${attempt}: ${reason}`, {
          ...outcomeFields(w, 'failed'),
          step: 'settle',
          attempt,
          reason,
        });
        throw err instanceof Error ? err : new Error(reason);
      }
      return await alerts.resolve(db, { job: w.job, subject: settleSubject(w.key), note: 'settled' });
    },

    async processWindow(input: WindowInput): Promise<WindowResult> {
      const w = resolveWindow(deps, input);
      const job = deps.catalog.get(w.job);
      const { attempt, workflowId, runId, isLocal } = attemptInfo();
      const startedAt = deps.now();
      const metrics = deps.metrics ?? noMetrics;
      const began = performance.now();
      const seconds = () => (performance.now() - began) / 1000;
      const run = {
        kind: 'window' as const,
        job: w.job,
        windowStart: w.start,
        generation: w.generation,
        workflowId,
        attempt,
        startedAt,
      };

      const skipDone = async (): Promise<WindowResult> => {
        if (input.afterBatch) {
          // Its batch logged (and counted) the window's outcome: this run only drives what follows.
          logger.info(
            `FOLLOW-UP job=${w.job} window=${w.key}: processed in its batch; its effects and alerts follow`,
            {
              ...outcomeFields(w, 'follow-up'),
              attempt,
            },
          );
        } else {
          logger.info(`SKIPPED reason=already-done job=${w.job} window=${w.key}`, {
            ...outcomeFields(w, 'skipped'),
            reason: 'already-done',
            attempt,
          });
          metrics.window({ job: w.job, outcome: 'skipped', reason: 'already-done' });
        }
        await recordRun(db, { ...run, finishedAt: deps.now(), outcome: 'skipped', reason: 'already-done' });
        // The run that processed it may have died before its effects were done, or before its
        // alerts (findings, recovery notice) went out: drive them.
        const open = await openEffectsOfWindow(db, w.key);
        return {
          key: w.key,
          outcome: 'already-done',
          counts: null,
          watermark: null,
          effects: open.keys,
          ...(Object.keys(open.retry).length > 0 ? { effectRetry: open.retry } : {}),
          alerts: await undeliveredNoticesOfWindow(db, w.key),
        };
      };

      const attemptMeta = { trigger: input.trigger, workflowId, at: startedAt };
      try {
        // A local attempt lost with its worker is run again at attempt 1 by the next worker (the
        // SDK keeps no record of it): the attempts are counted here, so that the job's
        // maximumAttempts still bounds them, as it bounds a regular activity's lost attempts.
        if (isLocal && runId) {
          const starts = await startLocalAttempt(db, w.key, runId);
          const max = input.policy.retry.maximumAttempts;
          // A lost attempt may have committed (its worker died before reporting): then the claim answers.
          if (max > 0 && starts > max && !(await isDone(db, w))) {
            throw ApplicationFailure.nonRetryable(
              `window ${w.key}: ${starts - attempt} attempt(s) were lost with their worker, and the job's ${max} attempt(s) are spent (${starts - 1} started); not run again`,
              FAILURE.attemptsLost,
            );
          }
        }
        if (job.prepare) {
          if (await isDone(db, w)) return await skipDone();
          await job.prepare({
            db: db.withoutPlugins(),
            ledger: db,
            job,
            window: { start: w.start, end: w.end },
            key: w.key,
            generation: w.generation,
            heartbeat: heartbeater(),
            log: (line) => logger.info(line),
          });
        }
        await reached(deps, CRASH_POINT.beforeClaim, w.key);
        // An approved rerun applies the change its approver saw, or nothing: the data may have
        // moved since the approval (allowed hours, a queue, a retry put hours between them).
        const approved = input.approved ? await replaced(db, w.job, w.start, w.generation) : undefined;
        const committed = await inWindowTransaction(
          deps,
          w,
          input,
          attemptMeta,
          attempt,
          (line) => logger.info(line),
          async (trx, attempts, runHandler) => {
            const key0 = windowKey(w.job, w.start);
            const copied =
              approved && job.writes
                ? await snapshot(trx, job.writes, { job: w.job, start: w.start, key0 })
                : null;
            const counts = await runHandler();
            if (approved) {
              const change = {
                job: w.job,
                windowStart: isoUtc(w.start),
                windowEnd: isoUtc(w.end),
                generation: w.generation,
                previous: approved.previous,
                ...changeOf(counts, copied ? await diff(trx, copied, redact) : null, approved.sent, redact),
              };
              const digest = previewDigest(change);
              if (digest !== input.approved)
                throw badInput(
                  FAILURE.changedSinceApproval,
                  `window ${w.key}: the data changed since the approval, and the rerun would change something else than the preview approved; nothing was committed. Now: ${previewLines({ ...change, computedAt: isoUtc(deps.now()), digest }, { rows: 5 }).join(' / ')}. Ask for the rerun again to see and approve this change`,
                );
            }
            await reached(
              deps,
              w.generation > 0 ? CRASH_POINT.inGenerationSwap : CRASH_POINT.inHandler,
              w.key,
            );
            const committed = await commit.record(trx, w, counts, attempts, input.policy, {
              workflowId,
              runId,
            });
            // Counts, run record and watermark commit with the effect: one commit per window,
            // carried by this last statement.
            const watermark = await finishWindow(trx, w, {
              counts,
              startedAt,
              finishedAt: deps.now(),
              workflowId,
              attempt,
            });
            return { ...committed, counts, watermark };
          },
        );
        if (!committed) return await skipDone();
        await reached(deps, CRASH_POINT.afterCommit, w.key);
        return commit.processed(w, committed, attempt, seconds());
      } catch (err) {
        const reason = redactError(err, redact);
        const finalAttempt = err instanceof ApplicationFailure && err.nonRetryable;
        logger.error(
          `FAILED job=${w.job} window=${w.key} attempt=${attempt}${finalAttempt ? ' (not retryable)' : ''}: ${reason}`,
          { ...outcomeFields(w, 'failed'), attempt, retryable: !finalAttempt, reason },
        );
        metrics.window({ job: w.job, outcome: 'failed', reason: failureReason(err), seconds: seconds() });
        await failAttempt(db, w, { ...attemptMeta, reason }).catch(() => undefined);
        await recordRun(db, { ...run, finishedAt: deps.now(), outcome: 'failed', reason }).catch(
          () => undefined,
        );
        throw err instanceof Error ? err : new Error(reason);
      }
    },
  };
  return {
    ...activities,
    // On its activity's span (a child span of its own inside a batch): job, window key, generation, outcome.
    processWindow: (input: WindowInput): Promise<WindowResult> =>
      activitySpan('processWindow', windowAttributes(input), () => activities.processWindow(input)),
  };
}
