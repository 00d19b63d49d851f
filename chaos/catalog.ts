// The fault suite's jobs, shared by its driver and its workers. Each lane is a sales summary on
// hourly windows in a year of its own; odd lanes run their windows as local activities (an attempt
// timeout the local path takes), even ones as activity tasks (the summary reads every order in its window, so lanes
// never see each other's orders), ticked by the driver with an explicit "now". The live job is
// minutely on the real clock, fired by a real Temporal Schedule: the workload clock skew acts on.
// Every window sends a report e-mail (an external effect); alerts go to a Telegram chat. Each lane
// also has a backup job of the suite's private cluster (a source database of its own), every
// window restore-drilled into the lane's scratch database on that cluster: the drill rounds' job.
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { localDestination } from '../jobs/backup/destination.js';
import { databaseBackup } from '../jobs/backup/index.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import { type Catalog, type JobSpec, type WindowContext } from '../schedules/job.js';
import { defineCatalog } from '../schedules/define.js';

export const LIVE_JOB = 'chaos-live';
export const laneJob = (lane: number): string => `chaos-l${lane}`;
/** Lane `lane`'s first window: 1 January of its own year. */
export const laneStart = (lane: number): Date => new Date(Date.UTC(2010 + lane, 0, 1));
export const ALERT_CHAT = 'ops-chat';
/** Lanes whose windows run as local activities (workflows/policy.ts runsLocally: attempts of 10 s or more). */
export const localLane = (lane: number): boolean => lane % 2 === 1;
/**
 * How a round's windows ran: local activities, activity tasks, in a batch activity (a batched
 * backfill), or a backup job's window with its restore drill.
 */
export type WindowPath = 'local' | 'task' | 'batch' | 'drill';
export const pathOf = (lane: number): WindowPath => (localLane(lane) ? 'local' : 'task');
const LOCAL_ATTEMPT = '12s';

/** Lane `lane`'s backup job: hourly windows from 1 January of a year of its own (closed long ago). */
export const drillJob = (lane: number): string => `chaos-d${lane}`;
export const drillStart = (lane: number): Date => new Date(Date.UTC(1980 + lane, 0, 1));
/** The database the backup jobs dump (on the suite's private cluster), and its one table's rows. */
export const BACKUP_SOURCE = 'chaos_backup_source';
export const BACKUP_TABLE = 'public.items';
export const BACKUP_ROWS = 20_000;
/** Lane `lane`'s scratch database, where its backup job's drills restore (created and dropped by each). */
export const scratchDatabase = (lane: number): string => `chaos_drill_l${lane}`;
/** Where the backup jobs write (a local directory under the run's own), each under `<job>/`. */
export const backupDir = (runDir: string): string => join(runDir, 'backups');
/** Newest N backups kept: retention removes older ones under faults too. */
export const BACKUP_KEEP = 3;
/** The drill's attempt: a dump, a read-back, a listing and a restore on a busy machine (local path). */
const BACKUP_ATTEMPT = '30s';

/** A database on the cluster `cluster` names (its host, port and query kept: the host's application name). */
export function onCluster(cluster: string, database: string): string {
  const u = new URL(cluster);
  u.pathname = `/${database}`;
  return u.toString();
}

/** How long a window holds its transaction open (0-300 ms, fixed per key), so faults meet it there. */
export function holdMs(key: string): number {
  let h = 0;
  for (const c of key) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return h % 300;
}

async function summariseAndReport(ctx: WindowContext) {
  const counts = await summariseWindow(ctx);
  await sleep(holdMs(ctx.key));
  return {
    ...counts,
    effects: [
      {
        name: 'report',
        channel: 'email' as const,
        request: {
          to: ['ops@example.test'],
          subject: `report ${ctx.key}`,
          text: `orders: ${counts.applied}`,
        },
      },
    ],
  };
}

/** Short timeouts: a dead attempt is retried elsewhere within seconds, and many faults fit a run. */
const common: Omit<JobSpec, 'name' | 'grid' | 'start'> = {
  lateness: '0m',
  attemptTimeout: '5s',
  effectTimeout: '3s',
  retry: { maximumAttempts: 50, initialInterval: '200ms', maximumInterval: '2s', backoffCoefficient: 2 },
  alerts: { telegram: [ALERT_CHAT] },
  handler: summariseAndReport,
};

export function chaosCatalog(opts: {
  lanes: number;
  liveStart: Date;
  /**
   * The backup jobs' cluster (any database's URL on it; a worker's carries its host's
   * application name, which its dumps, restores and drills then use too) and the run's directory.
   */
  backups: { cluster: string; runDir: string };
}): Catalog {
  const lanes = Array.from({ length: opts.lanes }, (_, lane) => ({
    ...common,
    name: laneJob(lane),
    grid: '1h',
    start: laneStart(lane).toISOString(),
    // A tick may plan a whole round at once (a catch-up); never fewer than a round holds.
    maxCatchUp: 24,
    ...(localLane(lane) ? { attemptTimeout: LOCAL_ATTEMPT } : {}),
  }));
  const destination = localDestination(backupDir(opts.backups.runDir));
  const backups = Array.from({ length: opts.lanes }, (_, lane) =>
    databaseBackup({
      name: drillJob(lane),
      grid: '1h',
      timezone: 'UTC',
      start: drillStart(lane).toISOString(),
      lateness: '0m',
      maxCatchUp: 24,
      attemptTimeout: BACKUP_ATTEMPT,
      retry: common.retry,
      alerts: common.alerts,
      database: onCluster(opts.backups.cluster, BACKUP_SOURCE),
      destination,
      retention: { daily: BACKUP_KEEP, weekly: 0, monthly: 0 },
      tables: [BACKUP_TABLE],
      restoreCheck: { every: 1, scratchDatabaseUrl: onCluster(opts.backups.cluster, scratchDatabase(lane)) },
    }),
  );
  return defineCatalog([
    ...lanes,
    ...backups,
    { ...common, name: LIVE_JOB, grid: '1m', start: opts.liveStart.toISOString() },
  ]);
}
