// pg-boss (12.38, its current release) running the hourly sales summary: one job
// per window, deduplicated by singletonKey on a `short` queue (at most one queued job per key,
// the counterpart of graphile-worker's jobKey), with the library's documented throughput settings.
//
// Settings followed: v10 removed teamSize/teamConcurrency; its author's advice for throughput is a
// batchSize with the handler running the batch's jobs concurrently
// (https://github.com/timgit/pg-boss/issues/542) and several work() calls, each its own polling
// worker (https://github.com/timgit/pg-boss/issues/483), polling at the minimum interval (0.5 s;
// a worker that got jobs polls again at once only when its batch took longer than the interval).
// A batch handler is all-or-nothing: pg-boss completes the batch after the handler returns
// (without waiting for that completion), or fails all of it.
//
// A SIGKILLed worker: its batch stays `active` until the job's expiration (expireInSeconds) has
// passed and a supervising instance's monitor pass (every max(monitorIntervalSeconds,
// superviseIntervalSeconds) since v11) fails it by timeout; with retries left it is retried. The
// kill test sets them short.
import { PgBoss } from 'pg-boss';
import type pg from 'pg';
import { applyWindow, peerPool, type WindowPayload } from './summary.js';
import type { PeerRun } from './graphile-worker.js';
import type { Window } from './orders.js';

export const PGBOSS_JOB = 'pg-boss';
const QUEUE = 'sales-summary';

export interface PgBossSettings {
  batchSize: number;
  workers: number;
  pollingIntervalSeconds: number;
  /** How long a job may stay active: a dead worker's jobs wait this long before a retry. */
  expireInSeconds: number;
  /** How often a supervising instance fails expired jobs (monitor, supervise and maintenance). */
  maintenanceIntervalSeconds: number;
  /** Retries after the first attempt: tidemark's test job allows 5 attempts, so 4. */
  retryLimit: number;
}
// batchSize 500 with 2 workers was the fastest of 100x2, 500x2, 1000x2, 50x4, 200x4 and 500x4 at
// 2,000 windows on this machine (a worker whose batch ends within the polling interval waits out
// the rest of it, so small batches cap it near batchSize x workers x 2 per second).
export const PGBOSS_DEFAULTS: PgBossSettings = {
  batchSize: 500,
  workers: 2,
  pollingIntervalSeconds: 0.5,
  expireInSeconds: 60,
  maintenanceIntervalSeconds: 1,
  retryLimit: 4,
};

function boss(url: string, settings: PgBossSettings, supervise: boolean): PgBoss {
  const b = new PgBoss({
    connectionString: url,
    supervise,
    schedule: false,
    maintenanceIntervalSeconds: settings.maintenanceIntervalSeconds,
    superviseIntervalSeconds: settings.maintenanceIntervalSeconds,
    monitorIntervalSeconds: settings.maintenanceIntervalSeconds,
  });
  b.on('error', (err) => console.error(`[pg-boss] ${err.message}`));
  return b;
}

/** Starts `workers` polling workers on the queue; resolves once they poll. */
export async function startPgBossWorker(
  url: string,
  settings: PgBossSettings,
  run: PeerRun,
): Promise<{ stop(): Promise<void> }> {
  const pool: pg.Pool = peerPool(url, 20);
  const b = boss(url, settings, true);
  await b.start();
  for (let i = 0; i < settings.workers; i++) {
    await b.work<WindowPayload>(
      QUEUE,
      { batchSize: settings.batchSize, pollingIntervalSeconds: settings.pollingIntervalSeconds },
      async (jobs) => {
        // Any failure fails the whole batch, so that none of it is marked complete unapplied.
        await Promise.all(
          jobs.map((j) => applyWindow(pool, PGBOSS_JOB, j.data.start, j.data.end, run.holdMs, run.handler)),
        );
      },
    );
  }
  return {
    async stop() {
      await b.stop({ graceful: true });
      await pool.end();
    },
  };
}

/** An enqueuer: creates the queue, then inserts one job per window keyed by the window. */
export async function pgBossEnqueuer(
  url: string,
  settings: PgBossSettings,
): Promise<{ enqueue(windows: Window[]): Promise<void>; release(): Promise<void> }> {
  const b = boss(url, settings, false);
  await b.start();
  await b.createQueue(QUEUE, {
    policy: 'short',
    expireInSeconds: settings.expireInSeconds,
    retryLimit: settings.retryLimit,
  });
  return {
    async enqueue(windows) {
      await b.insert(
        QUEUE,
        windows.map((w) => ({
          data: { start: w.start.toISOString(), end: w.end.toISOString() } satisfies WindowPayload,
          singletonKey: w.start.toISOString(),
        })),
      );
    },
    release: () => b.stop({ graceful: false }),
  };
}

/** What pg-boss holds for windows never applied: their jobs' states, counted ("failed after 5 attempts": 11). */
export async function pgBossJobStates(db: pg.Pool, starts: Date[]): Promise<Record<string, number>> {
  const r = await db.query<{ state: string; attempts: number; n: number }>(
    `select state, retry_count + (started_on is not null)::int as attempts, count(*)::int as n from pgboss.job
      where name = $1 and singleton_key = any($2::text[]) group by 1, 2 order by 1, 2`,
    [QUEUE, starts.map((s) => s.toISOString())],
  );
  const out: Record<string, number> = {};
  let seen = 0;
  for (const x of r.rows) {
    out[
      x.attempts
        ? `${x.state} after ${x.attempts} ${x.attempts === 1 ? 'attempt' : 'attempts'}`
        : `${x.state}, never started`
    ] = x.n;
    seen += x.n;
  }
  if (seen < starts.length) out['no job left'] = starts.length - seen;
  return out;
}

/** Jobs not yet in a final state (created, retry, active). */
export async function pgBossPending(db: pg.Pool): Promise<{ pending: number; locked: number }> {
  const r = await db.query<{ pending: number; locked: number }>(
    `select count(*)::int as pending, count(*) filter (where state = 'active')::int as locked
       from pgboss.job where name = $1 and state in ('created', 'retry', 'active')`,
    [QUEUE],
  );
  return r.rows[0]!;
}
