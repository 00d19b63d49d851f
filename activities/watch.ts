// The watch: a dead-man's switch over every job. It alerts when a job's watermark falls more
// than its threshold of windows behind the last closed window (which also catches a deleted
// or long-paused schedule and a task queue nobody polls), and clears when the job catches up.
import type { Client } from '@temporalio/client';
import { Cron } from 'croner';
import { readWatermark } from '../db/ledger.js';
import type { Job } from '../schedules/job.js';
import { scheduleIdOf } from '../contract/schedule-ids.js';
import { windowAt, windowsFrom, windowStartAt } from '../schedules/windows.js';
import { describeTick } from '../schedules/define.js';
import { isoUtc } from '../contract/window-key.js';
import { alerting } from './alerts.js';
import type { ActivityDeps } from './deps.js';

export interface LagReport {
  readonly job: string;
  readonly watermark: string | null;
  readonly behind: number;
  readonly threshold: number;
  readonly diagnosis: string[];
  /** When catch-up should be done and on what basis (lagging jobs only). */
  readonly catchUp?: string;
}

export interface WatchResult {
  readonly reports: readonly LagReport[];
  readonly deliveries: readonly string[];
}

/** How far windowsBehind counts. */
export const BEHIND_CAP = 10_000;

/** A count of windows behind in words: the cap is a floor, not the count. */
export const behindWords = (n: number): string =>
  n >= BEHIND_CAP ? `at least ${BEHIND_CAP} windows behind` : `${n} windows behind`;

/** Windows between the watermark and the end of the last closed window (capped). */
export function windowsBehind(job: Job, watermark: Date, now: Date, cap = BEHIND_CAP): number {
  const lastClosedEnd = windowAt(job.grid, job.timezone, new Date(now.getTime() - job.latenessMs)).start;
  // A fixed grid is aligned to the epoch in UTC: arithmetic (every scrape counts every job).
  if (job.grid.kind === 'fixed') {
    const from = windowStartAt(job.grid, job.timezone, watermark).getTime();
    return Math.min(cap, Math.max(0, Math.floor((lastClosedEnd.getTime() - from) / job.grid.ms)));
  }
  return [...windowsFrom(job.grid, job.timezone, watermark, (w) => w.end <= lastClosedEnd, cap)].length;
}

/** What holds catch-up back, as far as the watch can tell. */
export interface CatchUpFacts {
  readonly noPoller?: boolean;
  readonly paused?: boolean;
  /** The job's schedule cannot be read: deleted, or never synced. */
  readonly scheduleMissing?: boolean;
  readonly taskQueue?: string;
  /** The median duration of the job's recent done windows, when any are recorded. */
  readonly medianWindowMs?: number;
  readonly measured?: number;
}

/** A duration in words: 850ms, 12s, 1m30s, 2h5m, 3d4h. */
function roughly(ms: number): string {
  const s = Math.round(ms / 1000);
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (s < 60) return `${s}s`;
  const parts = (a: number, ua: string, b: number, ub: string) => `${a}${ua}${b ? `${b}${ub}` : ''}`;
  if (s < 3600) return parts(Math.floor(s / 60), 'm', s % 60, 's');
  if (s < 86_400) return parts(Math.floor(s / 3600), 'h', Math.floor((s % 3600) / 60), 'm');
  return parts(Math.floor(s / 86_400), 'd', Math.floor((s % 86_400) / 3600), 'h');
}

/** The tick's fire times strictly after `after`, as the Temporal server computes them. */
function* fires(job: Job, after: Date): Generator<Date> {
  const tick = job.tick;
  if (tick.kind === 'cron') {
    const cron = new Cron(tick.cron, { timezone: tick.timezone, mode: '5-part', paused: true });
    for (let t = cron.nextRun(after); t; t = cron.nextRun(t)) yield t;
    return;
  }
  for (let n = Math.floor((after.getTime() - tick.offsetMs) / tick.everyMs) + 1; ; n++)
    yield new Date(n * tick.everyMs + tick.offsetMs);
}

const MAX_TICKS = 5000;
const MAX_WINDOWS = 200_000;

/**
 * When a lagging job should have caught up: each tick (from the next fire on) starts at most
 * maxCatchUp new windows of those closed, while new windows keep closing on the grid; catch-up is
 * done once a tick can start every closed window, plus a window's measured duration when known.
 * Null when it cannot finish: nothing polls, the schedule is paused, or ticks start no more than close.
 */
export function catchUpEstimate(
  job: Job,
  watermark: Date,
  now: Date,
  facts: CatchUpFacts,
): { at: Date | null; text: string } {
  const behind = windowsBehind(job, watermark, now);
  if (facts.noPoller)
    return {
      at: null,
      text: `will not start until a worker polls task queue${facts.taskQueue ? ` "${facts.taskQueue}"` : ''} (${behindWords(behind)})`,
    };
  if (facts.scheduleMissing)
    return {
      at: null,
      text: `will not start until the schedule exists again: npx tidemark schedules sync (${behindWords(behind)})`,
    };
  if (facts.paused)
    return { at: null, text: `will not start until the schedule is resumed (${behindWords(behind)})` };
  const gridWords =
    job.grid.kind === 'fixed' ? `every ${job.grid.label}` : `every ${job.grid.label} (in ${job.timezone})`;
  const basis = [
    `${behindWords(behind)} at ${isoUtc(now)}`,
    `at most ${job.maxCatchUp} new windows per tick`,
    `the tick fires ${describeTick(job.tick)}`,
    `one window closes ${gridWords}`,
    ...(facts.medianWindowMs !== undefined
      ? [
          `recent windows took about ${roughly(facts.medianWindowMs)} (median of the last ${facts.measured ?? 'few'})`,
        ]
      : ['no window durations recorded yet (not counted)']),
  ].join('; ');
  // A tick plans up to maxCatchUp windows not done yet, running ones included (they are skipped):
  // a window holds its slot from its tick until it ends, a measured duration later.
  const takesMs = facts.medianWindowMs ?? 0;
  // A fixed grid under an interval tick: closing and catching up are both steady. A window holds
  // its slot for `period` ticks, so a cap that starts no more than closes meanwhile never catches up.
  if (job.grid.kind === 'fixed' && job.tick.kind === 'interval' && behind > job.maxCatchUp) {
    const period = Math.max(1, Math.ceil(takesMs / job.tick.everyMs));
    if (job.maxCatchUp * job.grid.ms <= period * job.tick.everyMs)
      return { at: null, text: `never catches up at this rate: ${basis}` };
  }
  // Tick by tick: the windows closed by its fire (counted once, walking the grid) less those started.
  const grid = windowsFrom(job.grid, job.timezone, watermark, () => true);
  let next = grid.next().value!;
  let closed = 0;
  let started = 0;
  let ticks = 0;
  /** When each started window ends, oldest first. */
  const ends: number[] = [];
  for (const fire of fires(job, now)) {
    if (++ticks > MAX_TICKS) break;
    while (next.end.getTime() + job.latenessMs <= fire.getTime() && closed <= MAX_WINDOWS) {
      closed++;
      next = grid.next().value!;
    }
    if (closed > MAX_WINDOWS) break;
    while (ends.length > 0 && ends[0]! <= fire.getTime()) ends.shift();
    const free = job.maxCatchUp - ends.length;
    if (closed - started <= free) {
      const at = new Date(fire.getTime() + takesMs);
      return { at, text: `expected done by about ${isoUtc(at)} (UTC); basis: ${basis}` };
    }
    for (let i = 0; i < free; i++) ends.push(fire.getTime() + takesMs);
    started += Math.max(0, free);
  }
  return { at: null, text: `not within ${MAX_TICKS} ticks (it may never catch up at this rate): ${basis}` };
}

/** The median duration of a job's last done windows, and how many it is taken over. */
async function recentDurations(
  deps: ActivityDeps,
  job: string,
): Promise<{ medianWindowMs?: number; measured?: number }> {
  const rows = await deps.db
    .selectFrom('job_windows')
    .select('duration_ms')
    .where('job', '=', job)
    .where('status', '=', 'done')
    .where('duration_ms', 'is not', null)
    .orderBy('window_start', 'desc')
    .limit(20)
    .execute();
  const ms = rows.map((r) => r.duration_ms!).sort((a, b) => a - b);
  if (ms.length === 0) return {};
  return { medianWindowMs: ms[Math.floor(ms.length / 2)]!, measured: ms.length };
}

async function diagnose(
  temporal: { client: Client; taskQueue: string } | undefined,
  job: Job,
): Promise<{ notes: string[]; noPoller: boolean; paused: boolean; scheduleMissing: boolean }> {
  if (!temporal) return { notes: [], noPoller: false, paused: false, scheduleMissing: false };
  const notes: string[] = [];
  let noPoller = false;
  let paused = false;
  let scheduleMissing = false;
  try {
    const d = await temporal.client.schedule.getHandle(scheduleIdOf(job.name)).describe();
    if (d.state.paused) {
      paused = true;
      notes.push(`its schedule is paused${d.state.note ? ` ("${d.state.note}")` : ''}`);
    }
  } catch (err) {
    scheduleMissing = true;
    notes.push(`its schedule ${scheduleIdOf(job.name)} cannot be read (${(err as Error).name}: deleted?)`);
  }
  try {
    const q = await temporal.client.workflowService.describeTaskQueue({
      namespace: temporal.client.options.namespace,
      taskQueue: { name: temporal.taskQueue },
      taskQueueType: 1,
    });
    if ((q.pollers ?? []).length === 0) {
      noPoller = true;
      notes.push(`no worker polls task queue "${temporal.taskQueue}"`);
    }
  } catch (err) {
    notes.push(`task queue "${temporal.taskQueue}" cannot be described (${(err as Error).message})`);
  }
  return { notes, noPoller, paused, scheduleMissing };
}

export function watchActivities(deps: ActivityDeps) {
  const alerts = alerting(deps);
  return {
    async checkLag(input: { now?: string }): Promise<WatchResult> {
      const now = input.now ? new Date(input.now) : deps.now();
      const reports: LagReport[] = [];
      const deliveries: string[] = [];
      for (const job of deps.catalog.jobs) {
        const watermark = (await readWatermark(deps.db, job.name)) ?? job.start;
        if (!watermark) continue; // never ticked and no declared start: nothing to measure against yet
        const behind = windowsBehind(job, watermark, now);
        if (behind > job.lagThreshold) {
          const found = await diagnose(deps.temporal, job);
          const diagnosis = found.notes;
          const catchUp = catchUpEstimate(job, watermark, now, {
            noPoller: found.noPoller,
            paused: found.paused,
            scheduleMissing: found.scheduleMissing,
            ...(deps.temporal ? { taskQueue: deps.temporal.taskQueue } : {}),
            ...(await recentDurations(deps, job.name)),
          }).text;
          reports.push({
            job: job.name,
            watermark: isoUtc(watermark),
            behind,
            threshold: job.lagThreshold,
            diagnosis,
            catchUp,
          });
          const error = `watermark ${isoUtc(watermark)} is ${behindWords(behind)} (threshold ${job.lagThreshold})${diagnosis.length ? `; ${diagnosis.join('; ')}` : ''}`;
          const raised = await alerts.activities.raiseIncident({
            job: job.name,
            subject: 'lag',
            kind: 'lag',
            error,
            attempts: 0,
            notes: [`catch-up: ${catchUp}`],
            // Without Temporal to ask, the next steps list each possible cause's fix.
            ...(deps.temporal
              ? {
                  lag: {
                    noPoller: found.noPoller,
                    paused: found.paused,
                    scheduleMissing: found.scheduleMissing,
                  },
                }
              : {}),
          });
          deliveries.push(...raised.deliveries);
        } else {
          reports.push({
            job: job.name,
            watermark: isoUtc(watermark),
            behind,
            threshold: job.lagThreshold,
            diagnosis: [],
          });
          const cleared = await alerts.resolve(deps.db, {
            job: job.name,
            subject: 'lag',
            note: `caught up: ${behind} windows behind`,
          });
          deliveries.push(...(cleared?.deliveries ?? []));
        }
      }
      return { reports, deliveries };
    },
  };
}
