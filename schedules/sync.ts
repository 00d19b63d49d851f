// Schedule sync: makes the Temporal Schedules match the catalog, like a declarative apply.
// Creates missing ones, updates changed ones (keeping a paused schedule paused), deletes
// tidemark schedules whose job left the catalog. Every policy is set explicitly.
import { createHash } from 'node:crypto';
import { ScheduleNotFoundError, ScheduleOverlapPolicy, type Client, type ScheduleOptions } from '@temporalio/client';
import type { Catalog, Job } from './job.js';

export const SCHEDULE_PREFIX = 'tidemark:';
export const scheduleIdOf = (job: string): string => `${SCHEDULE_PREFIX}${job}`;
const SPEC_MEMO = 'tidemarkSpec';

export interface SyncPlan {
  create: string[];
  update: string[];
  unchanged: string[];
  delete: string[];
  /** Schedules that are paused now and stay paused. */
  paused: string[];
}

/** The Schedule one job should have. The tick's own schedule is in UTC unless the job says otherwise. */
export function desiredSchedule(job: Job, taskQueue: string): ScheduleOptions {
  const core = {
    cron: job.tick.cron, timezone: job.tick.timezone, taskQueue, workflowType: 'tick', args: [{ job: job.name }],
    overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 day', pauseOnFailure: false,
  };
  const hash = createHash('sha256').update(JSON.stringify(core)).digest('hex').slice(0, 16);
  return {
    scheduleId: scheduleIdOf(job.name),
    spec: { cronExpressions: [core.cron], timezone: core.timezone },
    action: {
      type: 'startWorkflow',
      workflowType: core.workflowType,
      taskQueue,
      // The server appends the nominal time: `<job>/tick-2026-03-01T10:05:00Z`.
      workflowId: `${job.name}/tick`,
      args: core.args,
      memo: { [SPEC_MEMO]: hash },
      staticSummary: `tick of ${job.name}: start its closed windows`,
    },
    policies: { overlap: core.overlap, catchupWindow: core.catchupWindow, pauseOnFailure: core.pauseOnFailure },
    memo: { job: job.name },
  };
}

function memoHash(action: unknown): string | undefined {
  const memo = (action as { memo?: Record<string, unknown> }).memo;
  return typeof memo?.[SPEC_MEMO] === 'string' ? (memo[SPEC_MEMO] as string) : undefined;
}

async function listOurs(client: Client): Promise<string[]> {
  const ids: string[] = [];
  for await (const s of client.schedule.list()) if (s.scheduleId.startsWith(SCHEDULE_PREFIX)) ids.push(s.scheduleId);
  return ids;
}

/** Compares the catalog with the server; with `apply`, makes the server match. */
export async function syncSchedules(client: Client, catalog: Catalog, opts: { taskQueue: string; apply: boolean }): Promise<SyncPlan> {
  const plan: SyncPlan = { create: [], update: [], unchanged: [], delete: [], paused: [] };
  const wanted = new Map(catalog.jobs.map((j) => [scheduleIdOf(j.name), desiredSchedule(j, opts.taskQueue)]));
  const existing = new Set(await listOurs(client));

  for (const [id, desired] of wanted) {
    const handle = client.schedule.getHandle(id);
    let current;
    try {
      current = await handle.describe();
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
    }
    if (!current) {
      plan.create.push(id);
      if (opts.apply) await client.schedule.create(desired);
      continue;
    }
    if (current.state.paused) plan.paused.push(id);
    if (memoHash(current.action) === memoHash(desired.action)) {
      plan.unchanged.push(id);
      continue;
    }
    plan.update.push(id);
    if (opts.apply) {
      await handle.update((prev) => ({ spec: desired.spec, action: desired.action, policies: desired.policies, state: prev.state }));
    }
  }
  for (const id of existing) {
    if (wanted.has(id)) continue;
    plan.delete.push(id);
    if (opts.apply) {
      await client.schedule.getHandle(id).delete().catch((err: unknown) => {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      });
    }
  }
  return plan;
}

/** One line per change, for people. */
export function describePlan(plan: SyncPlan): string {
  const lines = [
    ...plan.create.map((id) => `+ create ${id}`),
    ...plan.update.map((id) => `~ update ${id}${plan.paused.includes(id) ? ' (stays paused)' : ''}`),
    ...plan.delete.map((id) => `- delete ${id} (its job is no longer in the catalog)`),
    ...plan.unchanged.map((id) => `  unchanged ${id}${plan.paused.includes(id) ? ' (paused)' : ''}`),
  ];
  return lines.join('\n') || '(no schedules)';
}
