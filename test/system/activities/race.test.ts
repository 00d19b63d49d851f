// One window, many hands: a schedule tick, a backfill and a manual trigger at once, on three
// worker processes; attempts racing inside PostgreSQL; a retried attempt whose first attempt
// is still alive. Each case: exactly one effect and one done marker.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { createActivities } from '../../../activities/index.js';
import { memoryLogger } from '../../../activities/logger.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { BackfillResult, TickResult, WindowInput, WindowResult } from '../../../contract/workflows.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../../helpers/jobs.js';
import { spawnWorker, type WorkerProcess, workerProcessEnv } from '../../helpers/processes.js';
import { realStack, uniqueQueue } from '../../helpers/temporal.js';

const stack = realStack();

const policy = {
  retry: { maximumAttempts: 3, initialInterval: '100ms', maximumInterval: '1s', backoffCoefficient: 2 },
  startToCloseTimeoutMs: 30_000,
};

async function doneMarkers(job: string): Promise<number> {
  const rows = await stack.t.db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', job)
    .where('status', '=', 'done')
    .execute();
  return rows.length;
}

test('eight attempts racing in PostgreSQL: one processes, seven report already-done', async () => {
  const job = 'race-db';
  const orders = await insertOrders(
    stack.t.db,
    ordersBetween(job, '2026-04-01T10:00:00Z', '2026-04-01T11:00:00Z', 50, 10),
  );
  const logger = memoryLogger();
  const acts = createActivities({
    db: stack.t.db,
    catalog: defineCatalog([salesJob(job)]),
    logger,
    now: () => new Date(),
  });
  const input: WindowInput = {
    job,
    start: '2026-04-01T10:00:00Z',
    end: '2026-04-01T11:00:00Z',
    generation: 0,
    key: `${job}/2026-04-01T10:00:00Z`,
    trigger: 'manual',
    policy,
  };
  const results = await Promise.all(Array.from({ length: 8 }, () => acts.processWindow(input)));
  assert.equal(results.filter((r) => r.outcome === 'processed').length, 1);
  assert.equal(results.filter((r) => r.outcome === 'already-done').length, 7);
  const ref = reference(orders, '2026-04-01T10:00:00Z', '2026-04-01T11:00:00Z');
  assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
  assert.equal(await doneMarkers(job), 1);
  assert.equal(logger.lines.filter((l) => l.startsWith('PROCESSED')).length, 1);
});

test('tick, backfill and manual trigger at once on three worker processes: one effect', async () => {
  const job = 'race-all';
  const taskQueue = uniqueQueue(job);
  const orders = await insertOrders(
    stack.t.db,
    ordersBetween(job, '2026-04-02T10:00:00Z', '2026-04-02T13:00:00Z', 90, 9),
  );
  const workerEnv = workerProcessEnv(stack, taskQueue, {
    name: job,
    grid: '1h',
    start: '2026-04-02T10:00:00Z',
    holdMs: 400,
  });
  const workers: WorkerProcess[] = await Promise.all(
    ['w1', 'w2', 'w3'].map((n) => spawnWorker(n, workerEnv)),
  );
  try {
    const client = stack.env.client;
    const key = `${job}/2026-04-02T11:00:00Z`;
    const manual = client.workflow
      .start('window', {
        taskQueue,
        workflowId: key,
        args: [
          {
            job,
            start: '2026-04-02T11:00:00Z',
            end: '2026-04-02T12:00:00Z',
            generation: 0,
            key,
            trigger: 'manual',
            policy,
          },
        ],
      })
      .then((h) => h.result() as Promise<WindowResult>)
      .catch((err: unknown) => {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return 'running' as const;
        throw err;
      });
    const tick = client.workflow.execute('tick', {
      taskQueue,
      workflowId: `${job}/tick-1`,
      args: [{ job, now: '2026-04-02T13:00:00Z' }],
    }) as Promise<TickResult>;
    const backfill = client.workflow.execute('backfill', {
      taskQueue,
      workflowId: `${job}/backfill-1`,
      args: [{ job, from: '2026-04-02T10:00:00Z', to: '2026-04-02T13:00:00Z', concurrency: 3 }],
    }) as Promise<BackfillResult>;
    const [m, tk, bf] = await Promise.all([manual, tick, backfill]);
    // Wait for every window run the tick started to finish.
    for (const k of tk.started) await client.workflow.getHandle(k).result();
    await client.workflow
      .getHandle(key)
      .result()
      .catch(() => undefined);

    const ref = reference(orders, '2026-04-02T10:00:00Z', '2026-04-02T13:00:00Z');
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
    assert.equal(await doneMarkers(job), 3);
    const logs = workers.map((w) => w.output()).join('\n');
    for (const hour of ['10', '11', '12']) {
      const processed = logs
        .split('\n')
        .filter((l) => l.includes(`PROCESSED job=${job} window=${job}/2026-04-02T${hour}:00:00Z`));
      assert.equal(processed.length, 1, `window ${hour}:00 processed ${processed.length} times`);
    }
    assert.ok(bf.processed + bf.alreadyDone + bf.running === 3, JSON.stringify(bf));
    assert.ok(m === 'running' || m.outcome === 'processed' || m.outcome === 'already-done');
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
});

test('a retried attempt while the first one is still alive: one effect', async () => {
  const job = 'race-retry';
  const taskQueue = uniqueQueue(job);
  const orders = await insertOrders(
    stack.t.db,
    ordersBetween(job, '2026-04-03T10:00:00Z', '2026-04-03T11:00:00Z', 40),
  );
  // Attempts time out after 1 s but hold their transaction for 2.5 s: attempt 2 starts on
  // another worker while attempt 1 is alive and about to commit.
  const workerEnv = workerProcessEnv(stack, taskQueue, {
    name: job,
    grid: '1h',
    start: '2026-04-03T10:00:00Z',
    holdMs: 2_500,
    attemptTimeout: '1s',
  });
  const workers = await Promise.all(['r1', 'r2'].map((n) => spawnWorker(n, workerEnv)));
  try {
    const key = `${job}/2026-04-03T10:00:00Z`;
    const result = (await stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId: key,
      args: [
        {
          job,
          start: '2026-04-03T10:00:00Z',
          end: '2026-04-03T11:00:00Z',
          generation: 0,
          key,
          trigger: 'manual',
          policy: {
            retry: {
              maximumAttempts: 5,
              initialInterval: '100ms',
              maximumInterval: '1s',
              backoffCoefficient: 1,
            },
            startToCloseTimeoutMs: 1_000,
          },
        },
      ],
    })) as WindowResult;
    // The first attempt's commit is the effect; the retry finds it done.
    assert.equal(result.outcome, 'already-done');
    const ref = reference(orders, '2026-04-03T10:00:00Z', '2026-04-03T11:00:00Z');
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
    assert.equal(await doneMarkers(job), 1);
    const logs = workers.map((w) => w.output()).join('\n');
    assert.equal(logs.split('\n').filter((l) => l.includes(`PROCESSED job=${job}`)).length, 1, logs);
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
});
