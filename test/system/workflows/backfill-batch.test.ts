// Batched backfill on the real server: N consecutive windows per activity, committed in groups,
// each with its own done marker and run record; resumed after a SIGKILL; a per-window run racing a
// batch on one window; a window failing inside a batch alerted and retried as today. And a worker
// SIGKILLed in a batch: every window it committed counts as processed, and the windows of the group
// it died in go to their own runs.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import { sql } from 'kysely';
import { memoryLogger } from '../../../activities/logger.js';
import { CRASH_POINT } from '../../../activities/crash-points.js';
import { readWatermark } from '../../../db/ledger.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { type Catalog, type JobSpec } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import type {
  BackfillInput,
  BackfillProgress,
  BackfillResult,
  TickResult,
  WindowRunResult,
} from '../../../contract/workflows.js';
import {
  gatedHandler,
  insertOrders,
  ordersBetween,
  reference,
  salesJob,
  summaryOf,
  type Order,
} from '../../helpers/jobs.js';
import { depsWithChannels, loopbackChannels } from '../../helpers/effects.js';
import { spawnWorker, type WorkerProcess, workerProcessEnv } from '../../helpers/processes.js';
import { eventually, realStack, uniqueQueue, windowPolicy, withWorker } from '../../helpers/temporal.js';

const stack = realStack();
const channels = loopbackChannels();
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/** Every window's runs by start: how many processed it, and by which workflow. */
async function runsByWindow(job: string) {
  const rows = await stack.t.db
    .selectFrom('job_runs')
    .select(['window_start', 'outcome', 'workflow_id', 'attempt'])
    .where('job', '=', job)
    .where('kind', '=', 'window')
    .orderBy('id')
    .execute();
  const by = new Map<string, typeof rows>();
  for (const r of rows) {
    const k = r.window_start!.toISOString().replace('.000Z', 'Z');
    by.set(k, [...(by.get(k) ?? []), r]);
  }
  return by;
}

/** Asserts each of `starts` was processed exactly once; returns the job's runs by window. */
async function processedOnce(job: string, starts: string[]) {
  const runs = await runsByWindow(job);
  const notOnce = starts.filter(
    (s) => (runs.get(s) ?? []).filter((r) => r.outcome === 'processed').length !== 1,
  );
  assert.deepEqual(notOnce, []);
  return runs;
}

async function assertTotals(job: string, orders: Order[], from: string, to: string): Promise<void> {
  const ref = reference(orders, from, to);
  assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
}

/** `n` hourly windows from `from`: the backfill's bounds and each window's start. */
function hours(from: string, n: number) {
  const t0 = Date.parse(from);
  return { from, to: iso(t0 + n * HOUR), starts: Array.from({ length: n }, (_, i) => iso(t0 + i * HOUR)) };
}

/** The sales summary hourly from `start`, each window due at its end. */
const hourlySales = (job: string, start: string, extra: Partial<JobSpec> = {}) =>
  salesJob(job, { grid: '1h', lateness: '0m', start, ...extra });

/** Runs `fn` with an in-process worker on `taskQueue` over `catalog`, with no effect channels. */
const withCatalogWorker = <T>(taskQueue: string, catalog: Catalog, fn: () => Promise<T>) =>
  withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    fn,
  );

const startBackfill = (taskQueue: string, workflowId: string, input: BackfillInput) =>
  stack.env.client.workflow.start('backfill', { taskQueue, workflowId, args: [input] });

const runBackfill = async (taskQueue: string, workflowId: string, input: BackfillInput) =>
  (await (await startBackfill(taskQueue, workflowId, input)).result()) as BackfillResult;

test('batched backfill: every window once, a run per window, progress and details, the watermark follows', async () => {
  const job = 'bb';
  const n = 30;
  const { from, to, starts } = hours('2026-06-01T00:00:00Z', n);
  const gate = gatedHandler();
  const catalog = defineCatalog([hourlySales(job, from, { handler: gate.handler })]);
  const taskQueue = uniqueQueue(job);
  await withCatalogWorker(taskQueue, catalog, async () => {
    const orders = await insertOrders(stack.t.db, ordersBetween(job, from, to, 600, 13));
    // A tick first does the first three windows.
    const tick = (await stack.env.client.workflow.execute('tick', {
      taskQueue,
      workflowId: `${job}/tick-1`,
      args: [{ job, now: starts[3]! }],
    })) as TickResult;
    for (const k of tick.started) await stack.env.client.workflow.getHandle(k).result();

    const held = `${job}/${starts[20]}`;
    gate.hold(held);
    const workflowId = `${job}/backfill`;
    // Pages of 12 windows (continue-as-new between them), batches of up to 8, two at once.
    const handle = await startBackfill(taskQueue, workflowId, {
      job,
      from,
      to,
      concurrency: 2,
      batch: 8,
      pageSize: 12,
    });
    // Released whatever happens: a held window would keep the worker from shutting down.
    try {
      await eventually(
        async () => (gate.entered(held) ? true : undefined),
        60_000,
        'the batch to reach 20:00',
      );
      const progress = await handle.query<BackfillProgress>('progress');
      assert.equal(progress.alreadyDone, 3, JSON.stringify(progress));
      assert.ok(progress.inFlight >= 1, JSON.stringify(progress));
      // The Web UI shows the run's current details (the workflow metadata query).
      const meta = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
      assert.match(meta.currentDetails ?? '', /processed \d+, already done 3/, meta.currentDetails);
      assert.match(meta.currentDetails ?? '', /batches of up to 8/, meta.currentDetails);
    } finally {
      gate.release(held);
    }

    const result = (await handle.result()) as BackfillResult;
    assert.deepEqual(
      { ...result },
      { job, from, to, processed: n - 3, alreadyDone: 3, running: 0, failed: [] },
    );
    assert.notEqual((await handle.describe()).runId, handle.firstExecutionRunId, 'continued as new');
    // No window workflow: every batched window ran inside the backfill's activities.
    await assert.rejects(
      stack.env.client.workflow.getHandle(`${job}/${starts[10]}`).describe(),
      WorkflowNotFoundError,
    );
    const runs = await processedOnce(job, starts);
    for (const s of starts.slice(3)) assert.equal(runs.get(s)![0]!.workflow_id, workflowId, s);
    const windows = await stack.t.db
      .selectFrom('job_windows')
      .select(['status', 'trigger', 'records_in'])
      .where('job', '=', job)
      .where('window_start', '>=', new Date(starts[3]!))
      .execute();
    assert.equal(windows.length, n - 3);
    assert.ok(windows.every((w) => w.status === 'done' && w.trigger === 'backfill' && w.records_in === 20));
    assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), new Date(to).toISOString());
    await assertTotals(job, orders, from, to);

    // Again: everything is done, nothing is processed, nothing is added.
    const again = await runBackfill(taskQueue, `${job}/backfill-2`, { job, from, to, batch: 8 });
    assert.deepEqual([again.processed, again.alreadyDone], [0, n]);
    await assertTotals(job, orders, from, to);
  });
});

test('batched backfill: a worker SIGKILLed in the middle of a batch; the batch resumes elsewhere, every window once', async () => {
  const job = 'bk';
  const taskQueue = uniqueQueue(job);
  const n = 12;
  const { from, to, starts } = hours('2026-07-01T00:00:00Z', n);
  const orders = await insertOrders(stack.t.db, ordersBetween(job, from, to, 240, 11));
  const env = (crashAt?: { point: string; nth: number }): Record<string, string> =>
    workerProcessEnv(stack, taskQueue, {
      name: job,
      grid: '1h',
      start: from,
      holdMs: 0,
      ...(crashAt ? { crashAt } : {}),
    });
  const workers: WorkerProcess[] = [];
  try {
    // Dies inside the sixth window's transaction: five are committed, the batch is in the middle.
    const doomed = await spawnWorker('bk-doomed', env({ point: CRASH_POINT.inHandler, nth: 6 }));
    workers.push(doomed);
    const workflowId = `${job}/backfill`;
    const handle = await startBackfill(taskQueue, workflowId, { job, from, to, concurrency: 1, batch: 10 });
    await eventually(
      async () => (doomed.child.signalCode !== null || doomed.child.exitCode !== null ? true : undefined),
      60_000,
      'the worker to die in the batch',
    );
    assert.equal(doomed.child.signalCode, 'SIGKILL', doomed.output());
    assert.match(doomed.output(), /CRASH point=inHandler key=bk\/2026-07-01T05:00:00Z/);
    workers.push(await spawnWorker('bk-survivor', env()));

    const result = (await handle.result()) as BackfillResult;
    assert.equal(result.processed + result.alreadyDone, n, JSON.stringify(result));
    assert.deepEqual([result.failed, result.running], [[], 0]);
    const runs = await processedOnce(job, starts);
    // The first batch (ten windows) committed its windows in groups; the worker died in the
    // group holding 05:00. The batch resumed in a later attempt of the same activity, and each
    // window that group may have held went to its own run (any of them may have killed the
    // worker), blaming none: no failed run. The rest ran in the batch; the second batch (two
    // windows) ran on the survivor at its first attempt.
    const processed = starts.map((s) => runs.get(s)!.find((r) => r.outcome === 'processed')!);
    const own = starts.flatMap((s, i) => (processed[i]!.workflow_id === `${job}/${s}` ? [i] : []));
    assert.ok(own.includes(5), JSON.stringify(processed));
    assert.deepEqual(
      own,
      Array.from({ length: own.length }, (_, k) => own[0]! + k),
      'one group of consecutive windows',
    );
    assert.ok(own[0]! <= 5 && own.at(-1)! < 10, JSON.stringify(own));
    const inBatches = processed.filter((_, i) => !own.includes(i));
    assert.ok(
      inBatches.every((r) => r.workflow_id === workflowId),
      JSON.stringify(processed),
    );
    assert.ok(
      processed.slice(0, own[0]!).every((r) => r.attempt === 1),
      'committed before the kill, at the first attempt',
    );
    assert.ok(
      processed.slice(own.at(-1)! + 1, 10).every((r) => r.attempt! >= 2),
      'the rest of the first batch, at a later attempt',
    );
    assert.ok(processed.slice(10).every((r) => r.attempt === 1));
    // Each handed over is on record as failed in the lost attempt, so that a later attempt hands
    // it over again: the windows of the lost group only.
    assert.deepEqual(
      starts.flatMap((s, i) =>
        runs
          .get(s)!
          .filter((r) => r.outcome === 'failed')
          .map((r) => [i, r.workflow_id, r.attempt]),
      ),
      own.map((i) => [i, workflowId, 1]),
    );
    assert.match(
      workers[1]!.output(),
      new RegExp(
        `BATCH job=${job}: attempt 1 of this batch ended \\(its worker lost\\) in a group of windows from ${job}/${starts[own[0]!]}`,
      ),
    );
    assert.equal(result.processed, n, JSON.stringify(result));
    await assertTotals(job, orders, from, to);
  } finally {
    for (const w of workers) await w.stop('SIGKILL');
  }
});

test('batched backfill: a per-window run racing a batch on the same window; the ledger claim decides, one effect', async () => {
  const job = 'br';
  const n = 6;
  const { from, to, starts } = hours('2026-08-01T00:00:00Z', n);
  const gate = gatedHandler();
  const catalog = defineCatalog([hourlySales(job, from, { handler: gate.handler })]);
  const taskQueue = uniqueQueue(job);
  await withCatalogWorker(taskQueue, catalog, async () => {
    const orders = await insertOrders(stack.t.db, ordersBetween(job, from, to, 120, 7));
    const raced = `${job}/${starts[3]}`;
    gate.hold(raced);
    // The per-window run claims the window first and holds its transaction open in the handler.
    const single = await stack.env.client.workflow.start('window', {
      taskQueue,
      workflowId: raced,
      args: [
        {
          job,
          start: starts[3],
          end: starts[4],
          generation: 0,
          key: raced,
          trigger: 'manual',
          policy: windowPolicy(3, 60_000),
        },
      ],
    });
    await eventually(async () => (gate.entered(raced) ? true : undefined), 30_000, 'the single run to hold');
    const backfill = await startBackfill(taskQueue, `${job}/backfill`, {
      job,
      from,
      to,
      concurrency: 1,
      batch: 6,
    });
    try {
      // The batch reaches the window and waits on its claim, behind the single run's transaction.
      await eventually(
        async () => {
          const r = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
           where datname = current_database() and wait_event_type = 'Lock'`.execute(stack.t.db);
          return r.rows[0]!.n > 0 ? true : undefined;
        },
        30_000,
        'the batch to wait on the claim',
      );
    } finally {
      gate.release(raced);
    }
    const one = (await single.result()) as WindowRunResult;
    assert.equal(one.outcome, 'processed');
    const result = (await backfill.result()) as BackfillResult;
    assert.deepEqual([result.processed, result.alreadyDone, result.failed], [n - 1, 1, []]);
    const runs = await processedOnce(job, starts);
    assert.deepEqual(
      runs.get(starts[3]!)!.map((r) => [r.outcome, r.workflow_id]),
      [
        ['processed', raced],
        ['skipped', `${job}/backfill`],
      ],
    );
    await assertTotals(job, orders, from, to);
  });
});

test('batched backfill: a window that fails inside a batch is retried as its own run and alerted', async () => {
  const job = 'bf-fail';
  const n = 5;
  const { from, to, starts } = hours('2026-08-10T00:00:00Z', n);
  const bad = `${job}/${starts[2]}`;
  const gate = gatedHandler();
  const catalog = defineCatalog([
    hourlySales(job, from, {
      retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms' },
      handler: async (ctx) => {
        if (ctx.key === bad) throw new Error('the source is down for this hour');
        return await gate.handler(ctx);
      },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withCatalogWorker(taskQueue, catalog, async () => {
    const orders = await insertOrders(stack.t.db, ordersBetween(job, from, to, 100, 0));
    const result = await runBackfill(taskQueue, `${job}/backfill`, {
      job,
      from,
      to,
      concurrency: 1,
      batch: 5,
    });
    assert.deepEqual([result.processed, result.alreadyDone, result.failed], [n - 1, 0, [bad]]);
    // Once in the batch, then the job's two attempts in its own window run, which alerts.
    const w = await stack.t.db
      .selectFrom('job_windows')
      .select(['status', 'attempts'])
      .where('job', '=', job)
      .where('window_start', '=', new Date(starts[2]!))
      .executeTakeFirstOrThrow();
    assert.deepEqual({ ...w }, { status: 'failed', attempts: 3 });
    await assert.rejects(stack.env.client.workflow.getHandle(bad).result());
    const incidents = await stack.t.db
      .selectFrom('incidents')
      .select(['subject', 'kind', 'closed_at'])
      .where('job', '=', job)
      .execute();
    assert.deepEqual(
      incidents.map((i) => ({ ...i })),
      [{ subject: bad, kind: 'window-failed', closed_at: null }],
    );
    const runs = await processedOnce(
      job,
      starts.filter((s) => s !== starts[2]),
    );
    assert.deepEqual(
      runs.get(starts[2]!)!.map((r) => r.outcome),
      ['failed', 'failed', 'failed'],
    );
    const ref = reference(orders, from, to);
    const skipped = reference(orders, starts[2]!, starts[3]!);
    assert.deepEqual(await summaryOf(stack.t.db, job), {
      count: ref.count - skipped.count,
      totalCents: ref.totalCents - skipped.totalCents,
    });
  });
});

test('batched backfill: windows with external effects are committed in the batch and their effects sent once by their own runs', async () => {
  const job = 'bf-mail';
  const n = 4;
  const { from, to, starts } = hours('2026-08-20T00:00:00Z', n);
  const catalog = defineCatalog([
    hourlySales(job, from, {
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        const mail = {
          to: ['ops@example.test'],
          subject: `report ${ctx.key}`,
          text: `orders: ${counts.applied}`,
        };
        return { ...counts, effects: [{ name: 'report', channel: 'email' as const, request: mail }] };
      },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  const deps = depsWithChannels(stack.t.db, catalog, channels.smtp, channels.chat);
  await withWorker(stack.env, taskQueue, deps, async () => {
    const orders = await insertOrders(stack.t.db, ordersBetween(job, from, to, 40, 0));
    const workflowId = `${job}/backfill`;
    const result = await runBackfill(taskQueue, workflowId, { job, from, to, concurrency: 2, batch: n });
    assert.deepEqual([result.processed, result.alreadyDone, result.failed], [n, 0, []]);
    const runs = await processedOnce(job, starts);
    for (const s of starts) {
      assert.equal(runs.get(s)!.find((r) => r.outcome === 'processed')!.workflow_id, workflowId, s);
      // The window's own run found it done and sent its e-mail.
      const run = (await stack.env.client.workflow.getHandle(`${job}/${s}`).result()) as WindowRunResult;
      assert.equal(run.outcome, 'already-done');
      assert.deepEqual(
        run.effectOutcomes.map((e) => e.outcome),
        ['done'],
      );
      assert.equal(channels.smtp.messages.filter((m) => m.subject === `report ${job}/${s}`).length, 1, s);
      // One outcome line for the window (its batch's), and its own run's line says it only follows up.
      const lines = deps.logger.lines.filter((l) => l.includes(` window=${job}/${s}`));
      assert.deepEqual(
        lines.map((l) => l.split(' ')[0]),
        ['PROCESSED', 'FOLLOW-UP'],
        lines.join('\n'),
      );
    }
    await assertTotals(job, orders, from, to);
  });
});

test('batched backfill of a job that settles its windows: each window runs as its own workflow, and the details say why', async () => {
  const job = 'bf-settle';
  const n = 3;
  const { from, to, starts } = hours('2026-08-25T00:00:00Z', n);
  const settled: string[] = [];
  const catalog = defineCatalog([
    hourlySales(job, from, {
      settle: async (ctx) => {
        settled.push(ctx.key);
      },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withCatalogWorker(taskQueue, catalog, async () => {
    const handle = await startBackfill(taskQueue, `${job}/backfill`, {
      job,
      from,
      to,
      concurrency: 2,
      batch: n,
    });
    const result = (await handle.result()) as BackfillResult;
    assert.deepEqual([result.processed, result.alreadyDone, result.failed], [n, 0, []]);
    const runs = await processedOnce(job, starts);
    for (const s of starts) {
      assert.equal(runs.get(s)!.find((r) => r.outcome === 'processed')!.workflow_id, `${job}/${s}`, s);
    }
    assert.deepEqual(settled.sort(), starts.map((s) => `${job}/${s}`).sort());
    const meta = await handle.query<{ currentDetails?: string }>('__temporal_workflow_metadata');
    assert.match(
      meta.currentDetails ?? '',
      /one window per run \(job bf-settle .*settles/,
      meta.currentDetails,
    );
  });
});

// What a SIGKILLed worker does to a batch's `processed` count, and to the batch's window that killed
// it. On a Temporal namespace and database of their own.
describe("a batch's worker SIGKILLed: the processed count, and the window that killed it", () => {
  const stack = realStack();
  const HOUR = 3_600_000;
  const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

  const exited = (w: WorkerProcess) => w.child.signalCode !== null || w.child.exitCode !== null;

  test('batched backfill killed mid-batch: every window it committed counts as processed, none as already done', async () => {
    const job = 'rv-count';
    const taskQueue = uniqueQueue(job);
    const n = 12;
    const from = '2026-07-01T00:00:00Z';
    const to = iso(Date.parse(from) + n * HOUR);
    await insertOrders(stack.t.db, ordersBetween(job, from, to, 240, 0));
    const env = (crashAt?: { point: string; nth: number }) =>
      workerProcessEnv(stack, taskQueue, {
        name: job,
        grid: '1h',
        start: from,
        holdMs: 0,
        ...(crashAt ? { crashAt } : {}),
      });
    const workers: WorkerProcess[] = [];
    try {
      // Dies inside the sixth window's transaction: the batch committed five windows before it.
      const doomed = await spawnWorker('rv-count-doomed', env({ point: CRASH_POINT.inHandler, nth: 6 }));
      workers.push(doomed);
      const workflowId = `${job}/backfill`;
      const handle = await stack.env.client.workflow.start('backfill', {
        taskQueue,
        workflowId,
        args: [{ job, from, to, concurrency: 1, batch: 10 }],
      });
      await eventually(async () => (exited(doomed) ? true : undefined), 60_000, 'the worker to die');
      assert.equal(doomed.child.signalCode, 'SIGKILL', doomed.output());
      workers.push(await spawnWorker('rv-count-survivor', env()));
      const result = (await handle.result()) as BackfillResult;
      // Nothing but this backfill (its batches, and the window its worker died in, in its own run)
      // touched the job: it processed every window once, and says so.
      const done = await stack.t.db
        .selectFrom('job_runs')
        .select('window_start')
        .where('job', '=', job)
        .where('outcome', '=', 'processed')
        .execute();
      assert.equal(done.length, n);
      assert.deepEqual(
        { processed: result.processed, alreadyDone: result.alreadyDone },
        { processed: n, alreadyDone: 0 },
      );
    } finally {
      for (const w of workers) await w.stop('SIGKILL');
    }
  });

  test('the windows of the group a worker died in are not run again by the batch: each goes to its own run', async () => {
    const job = 'rv-poison';
    const taskQueue = uniqueQueue(job);
    const n = 4;
    const from = '2026-07-10T00:00:00Z';
    const to = iso(Date.parse(from) + n * HOUR);
    const starts = Array.from({ length: n }, (_, i) => iso(Date.parse(from) + i * HOUR));
    const poison = `${job}/${starts[1]}`;
    await insertOrders(stack.t.db, ordersBetween(job, from, to, 40, 0));
    // Every worker dies in the handler of the second window (say, it runs out of memory there).
    // The batch's first group holds all four windows.
    const env = workerProcessEnv(stack, taskQueue, {
      name: job,
      grid: '1h',
      start: from,
      holdMs: 0,
      crashAt: { point: CRASH_POINT.inHandler, nth: 1, key: poison },
    });
    const workers: WorkerProcess[] = [];
    try {
      const first = await spawnWorker('rv-poison-1', env);
      workers.push(first);
      await stack.env.client.workflow.start('backfill', {
        taskQueue,
        workflowId: `${job}/backfill`,
        args: [{ job, from, to, concurrency: 1, batch: n }],
      });
      await eventually(async () => (exited(first) ? true : undefined), 60_000, 'the first worker to die');
      assert.match(first.output(), new RegExp(`CRASH point=inHandler key=${poison}`));
      const second = await spawnWorker('rv-poison-2', env);
      workers.push(second);
      // The batch's next attempt does not run the windows of the group its worker died in: each goes
      // to its own window run (the job's retry policy, alerts) instead of killing this worker too.
      const poisonRun = async () =>
        await stack.env.client.workflow
          .getHandle(poison)
          .describe()
          .then(() => true)
          .catch(() => undefined);
      const first_ = await eventually(
        async () => ((await poisonRun()) ? 'own run' : exited(second) ? 'died in the batch' : undefined),
        120_000,
        'the batch to hand the window over, or the second worker to die',
      );
      assert.equal(first_, 'own run', second.output());
      // The batch committed none of the group's windows: each went to its own run (any of them
      // may have killed the worker), is on record as lost with its group, and the batch says so.
      const byBatch = await stack.t.db
        .selectFrom('job_runs')
        .select(['window_start', 'outcome', 'reason'])
        .where('job', '=', job)
        .where('workflow_id', '=', `${job}/backfill`)
        .orderBy('window_start')
        .execute();
      assert.deepEqual(
        byBatch.map((r) => [iso(r.window_start!.getTime()), r.outcome]),
        starts.map((s) => [s, 'failed']),
      );
      assert.ok(
        byBatch.every((r) =>
          /worker lost\) in a group of windows from .* which may have held this one/.test(r.reason ?? ''),
        ),
        JSON.stringify(byBatch),
      );
      await eventually(
        async () =>
          new RegExp(
            `BATCH job=${job}: attempt 1 of this batch ended \\(its worker lost\\) in a group of windows from ${job}/${starts[0]}; the ${n} window\\(s\\) it may have held go to their own runs`,
          ).test(second.output()) || undefined,
        10_000,
        'the line saying where the batch lost its worker',
      );
      // The backfill's one lane drives them in order: the first is processed by its own run.
      await eventually(
        async () =>
          await stack.t.db
            .selectFrom('job_runs')
            .select('workflow_id')
            .where('job', '=', job)
            .where('window_start', '=', new Date(starts[0]!))
            .where('outcome', '=', 'processed')
            .executeTakeFirst()
            .then((r) => r?.workflow_id === `${job}/${starts[0]}` || undefined),
        60_000,
        'the first window processed by its own run',
      );
    } finally {
      for (const w of workers) await w.stop('SIGKILL');
    }
  });
});
