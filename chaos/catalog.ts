// The fault suite's jobs, shared by its driver and its workers. Each lane is a sales summary on
// hourly windows in a year of its own; odd lanes run their windows as local activities (an attempt
// timeout the local path takes), even ones as activity tasks (the summary reads every order in its window, so lanes
// never see each other's orders), ticked by the driver with an explicit "now". The live job is
// minutely on the real clock, fired by a real Temporal Schedule: the workload clock skew acts on.
// Every window sends a report e-mail (an external effect); alerts go to a Telegram chat.
import { setTimeout as sleep } from 'node:timers/promises';
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
/** How a round's windows ran: local activities, activity tasks, or in a batch activity (a batched backfill). */
export type WindowPath = 'local' | 'task' | 'batch';
export const pathOf = (lane: number): WindowPath => (localLane(lane) ? 'local' : 'task');
const LOCAL_ATTEMPT = '12s';

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

export function chaosCatalog(opts: { lanes: number; liveStart: Date }): Catalog {
  const lanes = Array.from({ length: opts.lanes }, (_, lane) => ({
    ...common,
    name: laneJob(lane),
    grid: '1h',
    start: laneStart(lane).toISOString(),
    // A tick may plan a whole round at once (a catch-up); never fewer than a round holds.
    maxCatchUp: 24,
    ...(localLane(lane) ? { attemptTimeout: LOCAL_ATTEMPT } : {}),
  }));
  return defineCatalog([
    ...lanes,
    { ...common, name: LIVE_JOB, grid: '1m', start: opts.liveStart.toISOString() },
  ]);
}
