// Schedule sync with alerting: a schedule that cannot be synced opens an incident for its job
// (one alert), and a later successful sync clears it (one notice).
import type { Client } from '@temporalio/client';
import type { ActivityDeps } from '../activities/deps.js';
import { raiseNow, resolveNow } from '../activities/direct-alerts.js';
import type { Catalog } from '../schedules/job.js';
import { syncSchedules, type SyncPlan } from './schedule-sync.js';
import { SYSTEM_JOB } from '../contract/schedule-ids.js';

export async function syncSchedulesWithAlerts(
  deps: ActivityDeps,
  client: Client,
  catalog: Catalog,
  opts: { taskQueue: string; apply: boolean; watchCron?: string; watchTaskQueue?: string },
): Promise<SyncPlan> {
  const plan = await syncSchedules(client, catalog, opts);
  if (!opts.apply) return plan;
  const failedJobs = new Set(plan.failed.map((f) => f.job));
  for (const f of plan.failed) {
    await raiseNow(deps, {
      job: f.job,
      subject: 'schedules',
      kind: 'schedule-sync-failed',
      error: `schedule ${f.id}: ${f.error}`,
      attempts: 1,
    });
  }
  for (const job of [...catalog.jobs.map((j) => j.name), SYSTEM_JOB]) {
    if (!failedJobs.has(job))
      await resolveNow(deps, { job, subject: 'schedules', note: 'schedules are in sync' });
  }
  return plan;
}
