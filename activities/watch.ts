// The watch: a dead-man's switch over every job. It alerts when a job's watermark falls more
// than its threshold of windows behind the last closed window (which also catches a deleted
// or long-paused schedule and a task queue nobody polls), and clears when the job catches up.
import type { Client } from '@temporalio/client';
import { readWatermark } from '../db/ledger.js';
import type { Job } from '../schedules/job.js';
import { scheduleIdOf } from '../contract/schedule-ids.js';
import { windowAt, windowsFrom, windowStartAt } from '../schedules/windows.js';
import { isoUtc } from '../contract/window-key.js';
import { alerting } from './alerts.js';
import type { ActivityDeps } from './deps.js';

export interface LagReport {
  readonly job: string;
  readonly watermark: string | null;
  readonly behind: number;
  readonly threshold: number;
  readonly diagnosis: string[];
}

export interface WatchResult {
  readonly reports: readonly LagReport[];
  readonly deliveries: readonly string[];
}

/** Windows between the watermark and the end of the last closed window (capped). */
export function windowsBehind(job: Job, watermark: Date, now: Date, cap = 10_000): number {
  const lastClosedEnd = windowAt(job.grid, job.timezone, new Date(now.getTime() - job.latenessMs)).start;
  // A fixed grid is aligned to the epoch in UTC: arithmetic (every scrape counts every job).
  if (job.grid.kind === 'fixed') {
    const from = windowStartAt(job.grid, job.timezone, watermark).getTime();
    return Math.min(cap, Math.max(0, Math.floor((lastClosedEnd.getTime() - from) / job.grid.ms)));
  }
  return [...windowsFrom(job.grid, job.timezone, watermark, (w) => w.end <= lastClosedEnd, cap)].length;
}

async function diagnose(
  temporal: { client: Client; taskQueue: string } | undefined,
  job: Job,
): Promise<string[]> {
  if (!temporal) return [];
  const notes: string[] = [];
  try {
    const d = await temporal.client.schedule.getHandle(scheduleIdOf(job.name)).describe();
    if (d.state.paused) notes.push(`its schedule is paused${d.state.note ? ` ("${d.state.note}")` : ''}`);
  } catch (err) {
    notes.push(`its schedule ${scheduleIdOf(job.name)} cannot be read (${(err as Error).name}: deleted?)`);
  }
  try {
    const q = await temporal.client.workflowService.describeTaskQueue({
      namespace: temporal.client.options.namespace,
      taskQueue: { name: temporal.taskQueue },
      taskQueueType: 1,
    });
    if ((q.pollers ?? []).length === 0) notes.push(`no worker polls task queue "${temporal.taskQueue}"`);
  } catch (err) {
    notes.push(`task queue "${temporal.taskQueue}" cannot be described (${(err as Error).message})`);
  }
  return notes;
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
          const diagnosis = await diagnose(deps.temporal, job);
          reports.push({
            job: job.name,
            watermark: isoUtc(watermark),
            behind,
            threshold: job.lagThreshold,
            diagnosis,
          });
          const error = `watermark ${isoUtc(watermark)} is ${behind} windows behind (threshold ${job.lagThreshold})${diagnosis.length ? `; ${diagnosis.join('; ')}` : ''}`;
          const raised = await alerts.activities.raiseIncident({
            job: job.name,
            subject: 'lag',
            kind: 'lag',
            error,
            attempts: 0,
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
