// The window activity: the job's handler, the window's done marker and the watermark advance,
// committed in one transaction. Two attempts racing produce one effect; the loser reports
// `already-done` and changes nothing.
import { ApplicationFailure } from '@temporalio/common';
import { listEffects, openEffectsOfWindow, recordEffects } from '../db/effects.js';
import { sealedTransaction, withConnection } from '../db/connection.js';
import { inSpan } from '../db/compaction.js';
import { copyRows } from '../db/copy.js';
import { recordWindowNotices, undeliveredNoticesOfWindow } from '../db/notices.js';
import { sql, type Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { WindowCounts } from '../schedules/job.js';
import {
  claimWindow,
  failAttempt,
  finishWindow,
  isDone,
  recordRun,
  startLocalAttempt,
  type TransactionBound,
  type WindowRef,
} from '../db/ledger.js';
import { alerting, type AlertDeliveries } from './alerts.js';
import { isAligned, isClosed, windowAt } from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import type {
  PreviewInput,
  PreviewTable,
  RerunPreview,
  WindowInput,
  WindowResult,
} from '../contract/workflows.js';
import { diff, previewDigest, snapshot } from './preview.js';
import { previewLines } from '../contract/preview-text.js';
import { CRASH_POINT, reached } from './crash-points.js';
import { policyOf, type ActivityDeps } from './deps.js';
import { checkWindowEffects } from './effect-input.js';
import { failureReason, noMetrics } from './metrics.js';
import { FAILURE } from '../contract/failures.js';
import { CLOCK_SKEW_TOLERANCE_MS, badInput } from './errors.js';
import { jobOrFail } from './plan.js';
import { activitySpan } from './tracing.js';
import { windowAttributes } from '../contract/span-attributes.js';
import { activityContext } from './context.js';

/** Activity heartbeats when running under Temporal; a no-op when called directly or as a local activity. */
function heartbeater(): (details?: unknown) => void {
  const ctx = activityContext();
  if (!ctx || ctx.info.isLocal) return () => undefined;
  return (details) => ctx.heartbeat(details);
}

function attemptInfo(): {
  attempt: number;
  workflowId: string | null;
  runId: string | null;
  isLocal: boolean;
} {
  const info = activityContext()?.info;
  if (!info) return { attempt: 1, workflowId: null, runId: null, isLocal: false };
  return {
    attempt: info.attempt,
    workflowId: info.workflowExecution?.workflowId ?? null,
    runId: info.workflowExecution?.runId ?? null,
    isLocal: info.isLocal,
  };
}

/** The fields every outcome line carries besides its text. */
function outcomeFields(w: { job: string; key: string; generation: number }, outcome: string) {
  return { job: w.job, window: w.key, generation: w.generation, outcome };
}

/** A secret in an error must not reach the logs, the ledger, or Temporal's history. */
function redactError(err: unknown, redact: (t: string) => string): string {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    e.message = redact(e.message);
    if (e.stack) e.stack = redact(e.stack);
  }
  return err instanceof Error ? err.message : redact(String(err));
}

/**
 * Bounds the window transaction by its attempt's timeout, on the server (set with the claim). A
 * lock wait ends with the attempt: an attempt behind another host's transaction on the window's
 * row (that host cut off between statements) would otherwise wait past its attempt, Temporal's
 * retries piling up behind it, each holding a pooled connection until the pool is empty. So does
 * a statement (statement_timeout): a runaway query would hold the window's locks past its attempt. A
 * transaction left idle for two attempts and 5 s is ended by the server: a host that went silent
 * (a partition sends no FIN, and TCP keepalive waits ~2 h by default) frees the row for the retry;
 * a slow attempt that outlives its own timeout by less may still commit (a retry then finds the
 * window done).
 */
function boundByAttempt(attemptMs: number): TransactionBound | undefined {
  if (!(attemptMs > 0)) return undefined;
  // The server refuses a longer timeout (an int of ms, ~24.8 days): capped, or no window of a job
  // whose attempts may run ~12.4 days or more could be claimed.
  const cap = (ms: number) => Math.min(ms, PG_MAX_TIMEOUT_MS);
  return { lockTimeoutMs: cap(attemptMs), idleTimeoutMs: cap(2 * attemptMs + IDLE_MARGIN_MS) };
}

const IDLE_MARGIN_MS = 5_000;

/** How long a preview waits for a row another transaction holds. */
const PREVIEW_LOCK_WAIT_MS = 10_000;
const LOCK_NOT_AVAILABLE = '55P03';

/** Thrown by the preview with what it saw: the window's transaction rolls back, and this is its result. */
class RolledBack<T> extends Error {
  constructor(readonly value: T) {
    super('rolled back: a preview never commits');
  }
}
const PG_MAX_TIMEOUT_MS = 2_147_483_647;

/** The incident subject of a window's settle step (apart from the window's own failures). */
export const settleSubject = (windowKey: string): string => `${windowKey}:settle`;

export function windowActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  const redact = deps.redact ?? ((t: string) => t);
  const alerts = alerting(deps);

  /** Checks the window against the job's grid and the clock before anything is written. */
  function resolveWindow(input: WindowInput): WindowRef {
    const job = jobOrFail(deps, input.job);
    const start = new Date(input.start);
    const end = new Date(input.end);
    if (Number.isNaN(start.getTime()) || Number.isNaN(end.getTime())) {
      throw badInput(
        FAILURE.badWindow,
        `window start "${input.start}" / end "${input.end}" must be ISO-8601 instants`,
      );
    }
    const expected = windowAt(job.grid, job.timezone, start);
    if (expected.start.getTime() !== start.getTime() || expected.end.getTime() !== end.getTime()) {
      throw badInput(
        FAILURE.badWindow,
        `[${input.start}, ${input.end}) is not a window of job "${job.name}" (grid "${job.grid.label}" in ${job.timezone}); the window containing ${input.start} is [${isoUtc(expected.start)}, ${isoUtc(expected.end)})`,
      );
    }
    const now = deps.now();
    const asOf = input.asOf === undefined ? undefined : new Date(input.asOf);
    if (asOf && Number.isNaN(asOf.getTime())) {
      throw badInput(
        FAILURE.badWindow,
        `asOf "${input.asOf}" must be an ISO-8601 instant (the server's time)`,
      );
    }
    if (!isClosed(expected, now, job.latenessMs)) {
      const dueInMs = end.getTime() + job.latenessMs - now.getTime();
      // Closed by the Temporal server's clock (the workflow's), not by this worker's: one of them is
      // off. Processed once both say closed: waiting, however long, is never a failure (a worker
      // clock behind would fail closed windows for good) and never early (a server clock ahead).
      const serverSaysClosed = asOf !== undefined && isClosed(expected, asOf, job.latenessMs);
      if (serverSaysClosed || dueInMs < CLOCK_SKEW_TOLERANCE_MS) {
        const behind = serverSaysClosed
          ? `; the Temporal server's clock says it closed: this worker's clock is ${Math.round((asOf.getTime() - now.getTime()) / 1000)} s behind it`
          : '';
        logger.info(
          `${serverSaysClosed ? 'CLOCK' : 'WAITING'} job=${job.name} window=${windowKey(job.name, start)}: closes in ${dueInMs} ms by this worker's clock${behind}`,
        );
        const retryInMs = Math.ceil(dueInMs / 1000) * 1000 + 1000;
        throw ApplicationFailure.create({
          type: FAILURE.windowNotClosedYet,
          nonRetryable: false,
          nextRetryDelay: retryInMs,
          // The workflow reads the delay here: nextRetryDelay does not reach it (the SDK drops it).
          details: [{ retryInMs }],
          message: `window ${windowKey(job.name, start)} closes in ${dueInMs} ms by this worker's clock (clock skew?)${behind}; retrying then`,
        });
      }
      throw badInput(
        FAILURE.windowNotClosed,
        `window ${windowKey(job.name, start)} is not closed yet: it may be processed from ${isoUtc(new Date(end.getTime() + job.latenessMs))}`,
      );
    }
    const generation = input.generation ?? 0;
    return { job: job.name, start, end, generation, key: windowKey(job.name, start, generation) };
  }

  /**
   * The window's transaction, on a connection of its own (so that the handler may COPY inside it):
   * the claim first, carrying the attempt's bounds (lock, statement and idle timeouts), then `body`,
   * which runs the handler through `runHandler` (its counts and effects checked). The real run
   * commits with its last statement; the preview throws to roll back. Null: the window is done.
   */
  async function inWindowTransaction<T>(
    w: WindowRef,
    input: WindowInput,
    meta: { trigger: string; workflowId: string | null; at: Date },
    attempt: number,
    log: (line: string) => void,
    body: (
      trx: Transaction<Database>,
      attempts: number,
      runHandler: () => Promise<WindowCounts>,
    ) => Promise<T>,
  ): Promise<T | null> {
    const job = deps.catalog.get(w.job);
    let windowOpen = true;
    return await withConnection(db, (conn, client) =>
      conn.transaction().execute(async (trx) => {
        const attempts = await claimWindow(trx, w, meta, boundByAttempt(input.policy.startToCloseTimeoutMs));
        if (attempts === undefined) return null;
        return await body(trx, attempts, async () => {
          const counts = await sealedTransaction(client, () =>
            job.handler({
              trx,
              job,
              window: { start: w.start, end: w.end },
              key: w.key,
              generation: w.generation,
              attempt,
              log,
              // COPY goes to the client, past kysely's guards: outside the window's transaction (ended
              // by a handler's own COMMIT or ROLLBACK, or ctx kept past the handler) it would commit
              // on its own, or inside whichever transaction the pooled client serves next.
              copyRows: async (table, columns, rows) => {
                if (!windowOpen || client.getTransactionStatus() === 'I') {
                  throw new Error(
                    `copyRows into ${table} outside window ${w.key}'s transaction: nothing was copied`,
                  );
                }
                return await copyRows(client, table, columns, rows);
              },
            }),
          );
          if (counts.applied + counts.quarantined !== counts.input) {
            throw badInput(
              FAILURE.countMismatch,
              `job "${job.name}" window ${w.key}: applied ${counts.applied} + quarantined ${counts.quarantined} != input ${counts.input}; nothing was committed`,
            );
          }
          // External effects are recorded with the window (an outbox) and performed after the commit.
          checkWindowEffects(job.name, w.key, counts.effects ?? []);
          return counts;
        });
      }),
    )
      .catch((err: unknown) => {
        // The preview's way out: kysely rolled the transaction back, and the connection was closed
        // rather than pooled again (whatever the handler left on its session, an advisory lock or
        // a prepared statement, goes with it).
        if (err instanceof RolledBack) return err.value as T;
        throw err;
      })
      .finally(() => (windowOpen = false));
  }

  /** The generation a rerun as `generation` replaces (the newest done one before it), and the effects it sent. */
  async function replaced(job: string, start: Date, generation: number) {
    const done = await db
      .selectFrom('job_windows')
      .select('generation')
      .where('job', '=', job)
      .where('window_start', '=', start)
      .where('generation', '<', generation)
      .where('status', '=', 'done')
      .execute();
    const previous = Math.max(0, ...done.map((m) => m.generation));
    const sent = await db
      .selectFrom('effects')
      .select('name')
      .where('window_key', '=', windowKey(job, start, previous))
      .execute();
    return { previous, sent: new Set(sent.map((e) => e.name)) };
  }

  /** What a handler's run changes, as a preview says it (the preview and the approved run alike). */
  function changeOf(counts: WindowCounts, tables: PreviewTable[] | null, sent: ReadonlySet<string>) {
    const names = (counts.effects ?? []).map((e) => e.name);
    return {
      outcome: 'ok' as const,
      counts: { input: counts.input, applied: counts.applied, quarantined: counts.quarantined },
      tables,
      effects: {
        repeat: names.filter((n) => sent.has(n)),
        added: names.filter((n) => !sent.has(n)),
        dropped: [...sent].filter((n) => !names.includes(n)),
      },
      findings: (counts.findings ?? []).map((f) => redact(`${f.subject}: ${f.message}`)),
    };
  }

  const activities = {
    /**
     * Lets the job read what its effects' providers answered and record it. A failure is
     * redacted before it is thrown (the workflow alerts it); a success clears its incident.
     */
    async settleWindow(input: WindowInput): Promise<AlertDeliveries | null> {
      const w = resolveWindow(input);
      const job = deps.catalog.get(w.job);
      if (!job.settle) return null;
      try {
        await job.settle({
          db,
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

    /**
     * What a rerun of a done window would change: the handler run for the new generation in the
     * window's own transaction (claim, bounds, guards: the real path), the declared tables copied
     * aside before and compared after, then rolled back, also on error. Nothing commits, no effect
     * is recorded or sent, the watermark does not move; the effects the handler asked for are
     * listed against those of the generation it replaces.
     */
    async previewWindow(input: PreviewInput): Promise<RerunPreview> {
      const job = jobOrFail(deps, input.job);
      const start = new Date(input.windowStart);
      if (Number.isNaN(start.getTime()) || !isAligned(job.grid, job.timezone, start))
        throw badInput(
          FAILURE.badWindow,
          `windowStart "${input.windowStart}" is not the start of a window of ${job.name} (grid "${job.grid.label}" in ${job.timezone})`,
        );
      const end = windowAt(job.grid, job.timezone, start).end;
      const key0 = windowKey(job.name, start);
      const marks = await db
        .selectFrom('job_windows')
        .select(['generation', 'status'])
        .where('job', '=', job.name)
        .where('window_start', '=', start)
        .execute();
      if (
        !marks.some((m) => m.generation === 0 && m.status === 'done') &&
        !(await inSpan(db, job.name, start))
      )
        throw badInput(
          FAILURE.badWindow,
          `window ${key0} has not been processed: nothing to rerun (a tick or a backfill will process it)`,
        );
      const reserved = await db
        .selectFrom('rerun_requests')
        .select((eb) => eb.fn.max('generation').as('g'))
        .where('job', '=', job.name)
        .where('window_start', '=', start)
        .executeTakeFirst();
      const generation =
        input.generation ?? Math.max(0, Number(reserved?.g ?? 0), ...marks.map((m) => m.generation)) + 1;
      const { previous, sent } = await replaced(job.name, start, generation);
      const w: WindowRef = {
        job: job.name,
        start,
        end,
        generation,
        key: windowKey(job.name, start, generation),
      };
      const computedAt = isoUtc(deps.now());
      const base = {
        job: job.name,
        windowStart: isoUtc(start),
        windowEnd: isoUtc(end),
        generation,
        previous,
      };
      const finish = (p: Omit<RerunPreview, 'digest' | 'computedAt' | keyof typeof base>): RerunPreview => {
        const whole = { ...base, ...p };
        logger.info(
          `PREVIEW job=${job.name} window=${w.key} outcome=${p.outcome}${p.note ? `: ${p.note}` : ''}`,
          { job: job.name, window: w.key, generation, outcome: p.outcome },
        );
        return { ...whole, computedAt, digest: previewDigest(whole) };
      };
      const none = { repeat: [], added: [], dropped: [] };
      const refusal =
        job.noPreview ??
        (job.prepare
          ? 'it prepares its windows in steps that commit on their own before the handler, which no rollback would undo'
          : undefined);
      if (refusal)
        return finish({
          outcome: 'refused',
          note: `${job.name} is not previewed: ${refusal}`,
          tables: null,
          effects: none,
          findings: [],
        });
      const { attempt, workflowId } = attemptInfo();
      try {
        const seen = await inWindowTransaction<{ counts: WindowCounts; tables: PreviewTable[] | null }>(
          w,
          { ...w, start: isoUtc(start), end: isoUtc(end), trigger: 'rerun', policy: policyOf(job) },
          { trigger: 'preview', workflowId, at: deps.now() },
          attempt,
          (line) => logger.info(`PREVIEW ${line}`),
          async (trx, _attempts, runHandler) => {
            // A preview does not queue behind another transaction's rows for a whole attempt: an
            // approver is waiting for it (this transaction only; it is rolled back).
            if (PREVIEW_LOCK_WAIT_MS < policyOf(job).startToCloseTimeoutMs)
              await sql`select set_config('lock_timeout', ${String(PREVIEW_LOCK_WAIT_MS)}, true)`.execute(
                trx,
              );
            const before = job.writes
              ? await snapshot(trx, job.writes, { job: job.name, start, key0 })
              : null;
            const counts = await runHandler();
            const tables = before ? await diff(trx, before, redact) : null;
            throw new RolledBack({ counts, tables });
          },
        );
        if (!seen)
          return finish({
            outcome: 'refused',
            note: `generation ${generation} of ${key0} has run already`,
            tables: null,
            effects: none,
            findings: [],
          });
        return finish(changeOf(seen.counts, seen.tables, sent));
      } catch (err) {
        if (err instanceof ApplicationFailure && err.type === FAILURE.windowNotClosedYet) throw err;
        // Rows held by another transaction (a run of this job) say nothing about the rerun: retried.
        if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE)
          throw ApplicationFailure.retryable(
            `rows the handler writes were locked by another transaction for ${PREVIEW_LOCK_WAIT_MS / 1000} s (a run of ${job.name} in progress?): ${redactError(err, redact)}`,
            'PreviewLocked',
          );
        return finish({
          outcome: 'failed',
          note: redactError(err, redact),
          tables: null,
          effects: none,
          findings: [],
        });
      }
    },

    async processWindow(input: WindowInput): Promise<WindowResult> {
      const w = resolveWindow(input);
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
        logger.info(`SKIPPED reason=already-done job=${w.job} window=${w.key}`, {
          ...outcomeFields(w, 'skipped'),
          reason: 'already-done',
          attempt,
        });
        metrics.window({ job: w.job, outcome: 'skipped', reason: 'already-done' });
        await recordRun(db, { ...run, finishedAt: deps.now(), outcome: 'skipped', reason: 'already-done' });
        // The run that processed it may have died before its effects were done, or before its
        // alerts (findings, recovery notice) went out: drive them.
        return {
          key: w.key,
          outcome: 'already-done',
          counts: null,
          watermark: null,
          effects: await openEffectsOfWindow(db, w.key),
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
            db,
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
        const approved = input.approved ? await replaced(w.job, w.start, w.generation) : undefined;
        const committed = await inWindowTransaction(
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
                ...changeOf(counts, copied ? await diff(trx, copied, redact) : null, approved.sent),
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
            await recordEffects(
              trx,
              (counts.effects ?? []).map((e) => ({
                key: `${w.key}:${e.name}`,
                job: w.job,
                windowKey: w.key,
                name: e.name,
                channel: e.channel,
                policy: e.policy ?? 'ask',
                request: e.request,
                providerKey: `${w.key}:${e.name}`,
              })),
            );
            // Earlier attempts failed: if that opened an incident, it closes with this commit.
            const recovery =
              attempts > 1
                ? await alerts.resolve(trx, {
                    job: w.job,
                    subject: w.key,
                    note: `window processed on attempt ${attempts}`,
                  })
                : null;
            // Findings alert although the window committed. Their incidents and the recovery notice
            // are recorded with the commit, so a retry that finds the window done still sends them.
            const alerted = [...(recovery?.deliveries ?? [])];
            for (const r of counts.recovered ?? []) {
              const closed = await alerts.resolve(trx, { job: w.job, subject: r.subject, note: r.note });
              alerted.push(...(closed?.deliveries ?? []));
            }
            for (const f of counts.findings ?? []) {
              const raised = await alerts.raise(trx, {
                job: w.job,
                subject: `${w.key}:${f.subject}`,
                kind: 'finding',
                error: f.message,
                attempts,
                ...(workflowId ? { workflowId } : {}),
                ...(runId ? { runId } : {}),
              });
              alerted.push(...raised.deliveries);
            }
            await recordWindowNotices(trx, w.key, alerted);
            // Counts, run record and watermark commit with the effect: one commit per window,
            // carried by this last statement.
            const watermark = await finishWindow(trx, w, {
              counts,
              startedAt,
              finishedAt: deps.now(),
              workflowId,
              attempt,
            });
            return {
              counts,
              watermark,
              alerted,
              effects: (counts.effects ?? []).map((e) => `${w.key}:${e.name}`),
              findings: counts.findings ?? [],
            };
          },
        );
        if (!committed) return await skipDone();
        await reached(deps, CRASH_POINT.afterCommit, w.key);
        const { counts, watermark, alerted, effects, findings } = committed;
        logger.info(
          `PROCESSED job=${w.job} window=${w.key} input=${counts.input} applied=${counts.applied} quarantined=${counts.quarantined}`,
          {
            ...outcomeFields(w, 'processed'),
            attempt,
            input: counts.input,
            applied: counts.applied,
            quarantined: counts.quarantined,
          },
        );
        metrics.window({ job: w.job, outcome: 'processed', seconds: seconds() });
        return {
          key: w.key,
          outcome: 'processed',
          counts: { input: counts.input, applied: counts.applied, quarantined: counts.quarantined },
          watermark: watermark ? isoUtc(watermark) : null,
          effects,
          alerts: alerted,
          findings: findings.map((f) => ({ subject: `${w.key}:${f.subject}`, message: redact(f.message) })),
        };
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
