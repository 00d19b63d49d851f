// The stack the rerun and approval tests share: a job with orders in one window, its worker deps,
// processing the window directly, asking for a rerun and waiting until the request is recorded.
import type { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { ActivityDeps } from '../../activities/index.js';
import { memoryLogger } from '../../activities/logger.js';
import type { Database } from '../../db/schema.js';
import { defineCatalog } from '../../schedules/define.js';
import type { RerunInput, RerunState, WindowRunResult } from '../../contract/workflows.js';
import type { TestDb } from './db.js';
import { insertOrders, ordersBetween, salesJob, type Order } from './jobs.js';
import { eventually, uniqueQueue } from './temporal.js';

type Stack = { readonly env: TestWorkflowEnvironment; readonly t: TestDb };
export interface Window {
  start: string;
  end: string;
}

export const policy = {
  retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 20_000,
};

/** Alice requests rerun 1 of `job`'s window at `windowStart`, bob approves it, and it runs to its end. */
export async function approvedRerun(client: Client, taskQueue: string, job: string, windowStart: string) {
  const rerun = await client.workflow.start('rerun', {
    taskQueue,
    workflowId: `${job}/${windowStart}/rerun-1`,
    args: [
      {
        job,
        windowStart,
        reason: 'late orders',
        requestedBy: 'alice',
        approvers: ['bob'],
        timeoutMs: 60_000,
      },
    ],
  });
  // Approving while the preview is computed is refused ('try again in a moment'): wait for both.
  await eventually(async () => {
    const s = await rerun.query<RerunState>('state');
    return s.request && !s.previewing ? true : undefined;
  });
  await rerun.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'web' }] });
  await rerun.result();
}

/** The rerun tools bound to a test file's stack. */
export function rerunTools(stack: Stack) {
  // The stack is ready only once its before hook ran: reach its client when a tool is used.
  const client = () => stack.env.client;
  return {
    /**
     * `job` starting at window W with `n` orders in it, on its own task queue. The deps hand the
     * worker a Temporal client when `temporal` is set (the request activity then checks open workflows).
     */
    async rerunJob(
      job: string,
      W: Window,
      n: number,
      opts: { temporal?: boolean; badEvery?: number } = {},
    ): Promise<{ taskQueue: string; orders: Order[]; deps: ActivityDeps }> {
      const catalog = defineCatalog([salesJob(job, { start: W.start, lateness: '0m' })]);
      const taskQueue = uniqueQueue(job);
      const orders = await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, n, opts.badEvery));
      const deps: ActivityDeps = {
        db: stack.t.db,
        catalog,
        logger: memoryLogger(),
        now: () => new Date(),
        ...(opts.temporal ? { temporal: { client: client(), taskQueue } } : {}),
      };
      return { taskQueue, orders, deps };
    },

    /** Runs a generation (0 unless given) of a window directly, as a tick or a rerun would. */
    async processWindow(taskQueue: string, job: string, W: Window, generation = 0): Promise<WindowRunResult> {
      const key = `${job}/${W.start}${generation ? `#${generation}` : ''}`;
      return (await client().workflow.execute('window', {
        taskQueue,
        workflowId: key,
        args: [{ job, ...W, generation, key, trigger: generation ? 'rerun' : 'manual', policy }],
      })) as WindowRunResult;
    },

    /** Alice asks bob (unless `input` says otherwise) for rerun `n` of window W. */
    startRerun: (
      taskQueue: string,
      job: string,
      W: Window,
      n: number | string,
      input: Partial<RerunInput> = {},
    ) =>
      client().workflow.start('rerun', {
        taskQueue,
        workflowId: `${job}/${W.start}/rerun-${n}`,
        args: [
          { job, windowStart: W.start, reason: 'x', requestedBy: 'alice', approvers: ['bob'], ...input },
        ],
      }),

    /** Waits until the rerun workflow `id` has recorded its request and computed its preview. */
    async waitForRequest(id: string): Promise<RerunState> {
      return await eventually(
        async () => {
          const s = await client().workflow.getHandle(id).query<RerunState>('state');
          return s.request && !s.previewing ? s : undefined;
        },
        20_000,
        `request ${id}`,
      );
    },

    /** The audited decisions on `request`, oldest first. */
    auditOf: (request: string) =>
      stack.t.db
        .selectFrom('approval_audit')
        .select(['actor', 'accepted'])
        .where('request', '=', request)
        .orderBy('id')
        .execute(),
  };
}

/**
 * Holds what `lock` takes in an open transaction until the returned function releases it (and
 * waits for the transaction to end), so a test can decide while something is locked.
 */
export async function holding(
  db: Kysely<Database>,
  lock: (trx: Transaction<Database>) => Promise<unknown>,
): Promise<() => Promise<void>> {
  let release!: () => void;
  let onLocked!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const locked = new Promise<void>((r) => (onLocked = r));
  const holder = db.transaction().execute(async (trx) => {
    await lock(trx);
    onLocked();
    await held;
  });
  await locked;
  return async () => {
    release();
    await holder;
  };
}

/**
 * What a stalled rerun waits on, for a timeout's message: the workflow's pending activities (with
 * their attempts and last failures) and the database sessions waiting for a lock.
 */
export async function whyStalled(client: Client, workflowId: string, db: Kysely<Database>): Promise<string> {
  const d = await client.workflow
    .getHandle(workflowId)
    .describe()
    .catch((err: unknown) => ({ error: String(err) }));
  const pending =
    'raw' in d
      ? (d.raw.pendingActivities ?? []).map(
          (a) => `${a.activityType?.name} attempt ${a.attempt} ${a.lastFailure?.message ?? ''}`,
        )
      : [d.error];
  const waiting = await sql<{ query: string; wait: string }>`
    select query, wait_event_type || ':' || wait_event as wait from pg_stat_activity
     where datname = current_database() and wait_event_type = 'Lock'`.execute(db);
  return `status ${'status' in d ? d.status.name : '?'}; pending activities: ${pending.join(' | ') || 'none'}; sessions waiting on a lock: ${waiting.rows.map((r) => `${r.wait} ${r.query}`).join(' | ') || 'none'}`;
}
