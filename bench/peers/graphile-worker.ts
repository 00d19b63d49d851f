// graphile-worker running the hourly sales summary: one job per window, deduplicated by jobKey,
// with the library's documented throughput settings.
//
// Settings followed: https://worker.graphile.org/docs/performance ("Quick stats" configuration:
// concurrentJobs 24, maxPoolSize 25, localQueue { size: 500 }, completeJobBatchDelay 0,
// failJobBatchDelay 0); new jobs reach the worker by LISTEN/NOTIFY, pollInterval only matters for
// future and retried jobs. The package's own docs for completeJobBatchDelay (dist/index.d.ts) say
// batching "increases the time for which jobs are locked past completion, thus increasing the risk
// that a catastrophic failure (e.g. worker crash or kill) may result in the jobs being executed
// again once they expire (after 4 hours by default)".
//
// A SIGKILLed worker (0.18.0): its locked jobs (the running ones and, with a local queue, the ones
// fetched into it) keep locked_by/locked_at; no other worker takes them until the lock is 4 hours
// old (get_job skips them; resetLockedAt frees them every 8-10 minutes once they are that old).
// The documented way out before that is force_unlock_workers(worker ids) for workers known to
// have crashed (https://worker.graphile.org/docs/admin-functions).
import { Logger, makeWorkerUtils, run, type Runner } from 'graphile-worker';
import type pg from 'pg';
import { applyWindow, peerPool, type Handler, type WindowPayload } from './summary.js';
import type { Window } from './orders.js';

export const GRAPHILE_JOB = 'graphile-worker';
const TASK = 'sales_summary';

export interface GraphileSettings {
  concurrency: number;
  maxPoolSize: number;
  localQueueSize: number;
  completeJobBatchDelay: number;
}
export const GRAPHILE_DEFAULTS: GraphileSettings = {
  concurrency: 24,
  maxPoolSize: 25,
  localQueueSize: 500,
  completeJobBatchDelay: 0,
};

const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`[graphile-worker] ${message}`);
});

export interface RunningPeer {
  stop(): Promise<void>;
}

/** How a peer's worker runs each job (summary.ts), and for how long it holds its transaction. */
export interface PeerRun {
  handler: Handler;
  holdMs?: number;
}

/** Starts a worker pool; resolves once it is listening for jobs. */
export async function startGraphileWorker(
  url: string,
  settings: GraphileSettings,
  how: PeerRun,
  handleSignals = false,
): Promise<RunningPeer> {
  const pool: pg.Pool = peerPool(url, settings.concurrency);
  // Its own pool, handed in: ended here, with an error listener (a pool graphile-worker makes
  // itself may still hold an idle client when the database is dropped, whose error then throws).
  const workerPool = peerPool(url, settings.maxPoolSize);
  const runner: Runner = await run({
    pgPool: workerPool,
    concurrency: settings.concurrency,
    noHandleSignals: !handleSignals,
    logger: quiet,
    preset: {
      worker: {
        localQueue: { size: settings.localQueueSize },
        completeJobBatchDelay: settings.completeJobBatchDelay,
        failJobBatchDelay: settings.completeJobBatchDelay,
      },
    },
    taskList: {
      [TASK]: async (payload) => {
        const w = payload as WindowPayload;
        await applyWindow(pool, GRAPHILE_JOB, w.start, w.end, how.holdMs, how.handler);
      },
    },
  });
  return {
    async stop() {
      await runner.stop();
      await pool.end();
      await workerPool.end();
    },
  };
}

const jobKeyOf = (start: Date) => `sales-summary/${start.toISOString()}`;

/** An enqueuer: one job per window, keyed by the window (re-adding a key replaces its pending job). */
export async function graphileEnqueuer(url: string): Promise<{
  enqueue(windows: Window[]): Promise<void>;
  release(): Promise<void>;
}> {
  const utilsPool = peerPool(url, 4);
  const utils = await makeWorkerUtils({ pgPool: utilsPool, logger: quiet });
  await utils.migrate();
  return {
    async enqueue(windows) {
      await utils.addJobs(
        windows.map((w) => ({
          identifier: TASK,
          payload: { start: w.start.toISOString(), end: w.end.toISOString() } satisfies WindowPayload,
          jobKey: jobKeyOf(w.start),
        })),
      );
    },
    release: async () => {
      await utils.release();
      await utilsPool.end();
    },
  };
}

/** Jobs that will still run (not permanently failed), and how many of them are locked. */
export async function graphilePending(db: pg.Pool): Promise<{ pending: number; locked: number }> {
  const r = await db.query<{ pending: number; locked: number }>(
    `select count(*)::int as pending, count(locked_by)::int as locked
       from graphile_worker.jobs where attempts < max_attempts`,
  );
  return r.rows[0]!;
}

/** What graphile-worker holds for windows never applied: their jobs' states, counted. */
export async function graphileJobStates(db: pg.Pool, starts: Date[]): Promise<Record<string, number>> {
  const r = await db.query<{ state: string; n: number }>(
    `select case when attempts >= max_attempts then 'failed after ' || attempts || ' attempts'
                 when locked_by is not null then 'locked by a worker'
                 else 'waiting, ' || attempts || ' attempts so far' end as state, count(*)::int as n
       from graphile_worker.jobs where key = any($1::text[]) group by 1 order by 1`,
    [starts.map((s) => jobKeyOf(s))],
  );
  const out: Record<string, number> = Object.fromEntries(r.rows.map((x) => [x.state, x.n]));
  const seen = r.rows.reduce((sum, x) => sum + x.n, 0);
  if (seen < starts.length) out['no job left'] = starts.length - seen;
  return out;
}

/** After a kill: frees the jobs of the (only, now dead) worker, as an operator who saw it crash would. */
export async function unlockDeadGraphileWorkers(db: pg.Pool): Promise<number> {
  const r = await db.query<{ id: string }>(
    `select distinct locked_by as id from graphile_worker.jobs where locked_by is not null`,
  );
  const ids = r.rows.map((x) => x.id);
  if (ids.length > 0) await db.query('select graphile_worker.force_unlock_workers($1::text[])', [ids]);
  return ids.length;
}
