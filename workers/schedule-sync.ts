// Schedule sync: makes the Temporal Schedules match the catalog, like a declarative apply.
// Creates missing ones, updates changed ones (keeping a paused schedule paused), deletes
// tidemark schedules whose job left the catalog. Every policy is set explicitly.
import { createHash } from 'node:crypto';
import type { Duration } from '@temporalio/common';
import {
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleDescription,
  type ScheduleOptions,
} from '@temporalio/client';
import { AesGcmCodec, KEY_ID_METADATA } from '../codec/aes-gcm.js';
import { searchAttributes } from '../contract/search-attributes.js';
import type { Catalog, Job } from '../schedules/job.js';
import { isFallbackDemo } from '../config/catalog-source.js';
import { watchQueueOf } from '../config/env.js';

import { SCHEDULE_PREFIX, SYSTEM_JOB, WATCH_SCHEDULE_ID, scheduleIdOf } from '../contract/schedule-ids.js';

const SPEC_MEMO = 'tidemarkSpec';

/** Schedules created, described or updated at a time by a sync. */
const SYNCS_AT_ONCE = 16;

export interface SyncPlan {
  /** Schedules that could not be created, updated or deleted, with why. */
  failed: { id: string; job: string; error: string }[];
  create: string[];
  update: string[];
  unchanged: string[];
  delete: string[];
  /** Schedules that are paused now and stay paused. */
  paused: string[];
}

/** The watch's schedule: every few minutes, in UTC, on its own task queue (see watchQueueOf). */
export function watchSchedule(taskQueue: string, cron: string): ScheduleOptions {
  const hash = createHash('sha256')
    .update(JSON.stringify({ cron, taskQueue, v: 2 }))
    .digest('hex')
    .slice(0, 16);
  return {
    scheduleId: WATCH_SCHEDULE_ID,
    spec: { cronExpressions: [cron], timezone: 'UTC' },
    action: {
      type: 'startWorkflow',
      workflowType: 'watch',
      taskQueue,
      workflowId: 'tidemark/watch',
      args: [{}],
      memo: { [SPEC_MEMO]: hash },
      typedSearchAttributes: searchAttributes('watch', null),
      staticSummary: 'watch: alert when a job falls behind',
    },
    policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '10 minutes', pauseOnFailure: false },
  };
}

/** The Schedule one job should have. The tick's own schedule is in UTC unless the job says otherwise. */
export function desiredSchedule(job: Job, taskQueue: string): ScheduleOptions {
  const tick = job.tick;
  const core = {
    ...(tick.kind === 'cron'
      ? { cron: tick.cron, timezone: tick.timezone }
      : { every: tick.everyMs, offset: tick.offsetMs }),
    taskQueue,
    workflowType: 'tick',
    args: [{ job: job.name }],
    overlap: ScheduleOverlapPolicy.SKIP,
    catchupWindow: '1 day',
    pauseOnFailure: false,
    searchAttributes: { TidemarkKind: 'tick', TidemarkJob: job.name },
  };
  const hash = createHash('sha256').update(JSON.stringify(core)).digest('hex').slice(0, 16);
  return {
    scheduleId: scheduleIdOf(job.name),
    // A derived tick is an interval from the UTC epoch, to the second: each window's end + lateness.
    spec:
      tick.kind === 'cron'
        ? { cronExpressions: [tick.cron], timezone: tick.timezone }
        : { intervals: [{ every: tick.everyMs, offset: tick.offsetMs }] },
    action: {
      type: 'startWorkflow',
      workflowType: core.workflowType,
      taskQueue,
      // The server appends the nominal time: `<job>/tick-2026-03-01T10:05:00Z`.
      workflowId: `${job.name}/tick`,
      args: core.args,
      memo: { [SPEC_MEMO]: hash },
      typedSearchAttributes: searchAttributes('tick', job.name),
      staticSummary: `tick of ${job.name}: start its closed windows`,
    },
    policies: {
      overlap: core.overlap,
      catchupWindow: core.catchupWindow as Duration,
      pauseOnFailure: core.pauseOnFailure,
    },
    memo: { job: job.name },
  };
}

function memoHash(action: unknown): string | undefined {
  const memo = (action as { memo?: Record<string, unknown> }).memo;
  return typeof memo?.[SPEC_MEMO] === 'string' ? (memo[SPEC_MEMO] as string) : undefined;
}

async function listOurs(client: Client): Promise<string[]> {
  const ids: string[] = [];
  for await (const s of client.schedule.list())
    if (s.scheduleId.startsWith(SCHEDULE_PREFIX)) ids.push(s.scheduleId);
  return ids;
}

/** Compares the catalog with the server; with `apply`, makes the server match. */
export async function syncSchedules(
  client: Client,
  catalog: Catalog,
  opts: { taskQueue: string; apply: boolean; watchCron?: string; watchTaskQueue?: string },
): Promise<SyncPlan> {
  const plan: SyncPlan = { failed: [], create: [], update: [], unchanged: [], delete: [], paused: [] };
  const wanted = new Map(catalog.jobs.map((j) => [scheduleIdOf(j.name), desiredSchedule(j, opts.taskQueue)]));
  const watchQueue = opts.watchTaskQueue ?? watchQueueOf({ TIDEMARK_TASK_QUEUE: opts.taskQueue });
  wanted.set(WATCH_SCHEDULE_ID, watchSchedule(watchQueue, opts.watchCron ?? '*/5 * * * *'));
  let existing = new Set<string>();
  try {
    existing = new Set(await listOurs(client));
  } catch (err) {
    // Without the list no orphan can be found; creating and updating are still tried below.
    plan.failed.push({
      id: `${SCHEDULE_PREFIX}*`,
      job: SYSTEM_JOB,
      error: `listing schedules: ${(err as Error).message}`,
    });
  }

  // The demo that tidemark fell back to (run in the wrong directory, a catalog file misnamed) must
  // not replace your schedules with its own: refused before anything changes.
  const orphans = [...existing].filter((id) => !wanted.has(id));
  if (opts.apply && orphans.length > 0 && isFallbackDemo(catalog))
    throw new Error(
      `schedules sync: no catalog module was named, so the catalog is the demo catalog, and syncing it would delete ${orphans.length} schedule(s) of jobs not in it (${orphans.join(', ')}): name your catalog (--catalog, TIDEMARK_CATALOG or tidemark.config.js in the working directory), or set TIDEMARK_CATALOG=demo to sync the demo on purpose`,
    );
  // A few schedules at a time (a thousand one after another take half a minute); the plan lists
  // them in the catalog's order all the same.
  const all = [...wanted];
  for (let i = 0; i < all.length; i += SYNCS_AT_ONCE)
    await Promise.all(
      all.slice(i, i + SYNCS_AT_ONCE).map(async ([id, desired]) => {
        try {
          await syncOne(client, plan, id, desired, opts.apply);
        } catch (err) {
          plan.failed.push({
            id,
            job: id === WATCH_SCHEDULE_ID ? SYSTEM_JOB : id.slice(SCHEDULE_PREFIX.length),
            error: (err as Error).message,
          });
        }
      }),
    );
  const order = new Map(all.map(([id], i) => [id, i]));
  const byCatalog = (a: string, b: string) => (order.get(a) ?? -1) - (order.get(b) ?? -1);
  for (const ids of [plan.create, plan.update, plan.unchanged, plan.paused]) ids.sort(byCatalog);
  plan.failed.sort((a, b) => byCatalog(a.id, b.id));
  for (const id of existing) {
    if (wanted.has(id)) continue;
    plan.delete.push(id);
    if (opts.apply) {
      await client.schedule
        .getHandle(id)
        .delete()
        .catch((err: unknown) => {
          if (!(err instanceof ScheduleNotFoundError))
            plan.failed.push({ id, job: id.slice(SCHEDULE_PREFIX.length), error: (err as Error).message });
        });
    }
  }
  return plan;
}

/** The key id new payloads of `client` are encrypted with; undefined: they are written plain. */
function currentKeyId(client: Client): string | undefined {
  return (client.options.dataConverter?.payloadCodecs ?? []).find((c) => c instanceof AesGcmCodec)
    ?.currentKeyId;
}

/**
 * Whether the payloads the server stores in a schedule's action (its args and memo, copied into every
 * workflow it starts) were written with another key than the current one, or plain while payloads are
 * encrypted. Such a schedule is rewritten even when nothing else changed: a key rotation must reach the
 * schedules, or every tick fails the day the old key is dropped.
 */
function staleEncryption(
  raw: ScheduleDescription['raw'],
  keyId: string | undefined,
  which: 'action' | 'memo' | 'both' = 'both',
): boolean {
  const start = raw.schedule?.action?.startWorkflow;
  const payloads = [
    ...(which !== 'memo'
      ? [...(start?.input?.payloads ?? []), ...Object.values(start?.memo?.fields ?? {})]
      : []),
    // The schedule's own memo: every describe and list decodes it.
    ...(which !== 'action' ? Object.values(raw.memo?.fields ?? {}) : []),
  ];
  return payloads.some((p) => {
    const id = p.metadata?.[KEY_ID_METADATA];
    return (id ? Buffer.from(id).toString('utf8') : undefined) !== keyId;
  });
}

async function syncOne(
  client: Client,
  plan: SyncPlan,
  id: string,
  desired: ScheduleOptions,
  apply: boolean,
): Promise<void> {
  const handle = client.schedule.getHandle(id);
  let current;
  try {
    current = await handle.describe();
  } catch (err) {
    if (!(err instanceof ScheduleNotFoundError)) throw err;
  }
  if (!current) {
    plan.create.push(id);
    if (apply) await client.schedule.create(desired);
    return;
  }
  if (current.state.paused) plan.paused.push(id);
  const keyId = currentKeyId(client);
  if (memoHash(current.action) === memoHash(desired.action) && !staleEncryption(current.raw, keyId)) {
    plan.unchanged.push(id);
    return;
  }
  plan.update.push(id);
  if (!apply) return;
  if (staleEncryption(current.raw, keyId, 'memo')) {
    // The schedule's own memo cannot be updated (the server refuses memo updates on workflow-backed
    // schedules, and the SDK's update keeps it): made again with the current key, its pause and note
    // kept. A fire missed in between is caught up by the next tick (closed windows from the watermark).
    await handle.delete();
    await client.schedule.create({
      ...desired,
      state: { paused: current.state.paused, ...(current.state.note ? { note: current.state.note } : {}) },
    });
    return;
  }
  await handle.update((prev) => ({
    spec: desired.spec,
    action: desired.action,
    policies: desired.policies,
    state: prev.state,
  }));
}

/** One line per change, for people. */
export function describePlan(plan: SyncPlan): string {
  const lines = [
    ...plan.failed.map((f) => `! failed ${f.id}: ${f.error}`),
    ...plan.create.map((id) => `+ create ${id}`),
    ...plan.update.map((id) => `~ update ${id}${plan.paused.includes(id) ? ' (stays paused)' : ''}`),
    ...plan.delete.map((id) => `- delete ${id} (its job is no longer in the catalog)`),
    ...plan.unchanged.map((id) => `  unchanged ${id}${plan.paused.includes(id) ? ' (paused)' : ''}`),
  ];
  return lines.join('\n') || '(no schedules)';
}
