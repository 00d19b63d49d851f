// Hostile review of issue 10 (batched backfill, the local window attempt): what a SIGKILLed worker
// does to a batch's `processed` count, and to a window that allows one attempt when run locally.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { CRASH_POINT } from '../../activities/crash-points.js';
import type { BackfillResult, WindowRunResult } from '../../contract/workflows.js';
import { insertOrders, ordersBetween } from '../helpers/jobs.js';
import { spawnWorker, type WorkerProcess, workerProcessEnv } from '../helpers/processes.js';
import { eventually, realStack, uniqueQueue } from '../helpers/temporal.js';
import { hourlyWindow, windowPolicy } from '../helpers/windows.js';

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

test('a local window attempt allowing one attempt, lost with its worker: not run again on the next worker, the window fails', async () => {
  const job = 'rv-once';
  const start = '2026-07-04T00:00:00Z';
  const end = '2026-07-04T01:00:00Z';
  const key = `${job}/${start}`;
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, start, end, 10));
  // Every worker that reaches the handler of this window dies there (a poison window: say it runs
  // the worker out of memory). The job allows one attempt.
  const env = workerProcessEnv(stack, taskQueue, {
    name: job,
    grid: '1h',
    start,
    holdMs: 0,
    crashAt: { point: CRASH_POINT.inHandler, nth: 1 },
  });
  const workers: WorkerProcess[] = [];
  try {
    const first = await spawnWorker('rv-once-1', env);
    workers.push(first);
    const run = stack.env.client.workflow
      .execute('window', {
        taskQueue,
        workflowId: key,
        args: [hourlyWindow(job, Date.parse(start), 0, windowPolicy(1, 15_000))],
      })
      .then(
        (r: WindowRunResult) => ({ ok: r }),
        (err: unknown) => ({ err }),
      );
    await eventually(async () => (exited(first) ? true : undefined), 60_000, 'the first worker to die');
    assert.match(first.output(), /CRASH point=inHandler/);
    const second = await spawnWorker('rv-once-2', env);
    workers.push(second);
    // One attempt was allowed and it was spent: the window ends failed (its attempt timed out, as a
    // regular activity's does) and alerts; the second worker never runs the handler.
    const secondDied = eventually(async () => (exited(second) ? 'died' : undefined), 120_000, 'x').catch(
      () => 'alive',
    );
    const outcome = await Promise.race([run, secondDied]);
    assert.notEqual(outcome, 'died', `the handler ran again on the next worker:\n${second.output()}`);
    assert.ok('err' in (outcome as object), JSON.stringify(outcome));
    assert.ok((outcome as { err: unknown }).err instanceof WorkflowFailedError);
    assert.doesNotMatch(second.output(), /CRASH point=inHandler/);
    // Recorded and alerted as a failed window, not left running.
    const row = await stack.t.db
      .selectFrom('job_windows')
      .select(['status', 'reason'])
      .where('window_key', '=', key)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 'failed');
    assert.match(row.reason ?? '', /lost with their worker/);
    const incidents = await stack.t.db
      .selectFrom('incidents')
      .select(['subject', 'kind'])
      .where('job', '=', job)
      .execute();
    assert.deepEqual(
      incidents.map((i) => ({ ...i })),
      [{ subject: key, kind: 'window-failed' }],
    );
  } finally {
    for (const w of workers) await w.stop('SIGKILL');
  }
});

test('a window that killed the worker running its batch is not run again by the batch: it goes to its own run', async () => {
  const job = 'rv-poison';
  const taskQueue = uniqueQueue(job);
  const n = 4;
  const from = '2026-07-10T00:00:00Z';
  const to = iso(Date.parse(from) + n * HOUR);
  const starts = Array.from({ length: n }, (_, i) => iso(Date.parse(from) + i * HOUR));
  const poison = `${job}/${starts[1]}`;
  await insertOrders(stack.t.db, ordersBetween(job, from, to, 40, 0));
  // Every worker dies in the handler of the second window (say, it runs out of memory there).
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
    // The batch's next attempt runs the windows it had not reported; the one its worker died in
    // goes to its own window run (the job's retry policy, alerts) instead of killing this worker too.
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
    const processed = await stack.t.db
      .selectFrom('job_runs')
      .select('window_start')
      .where('job', '=', job)
      .where('outcome', '=', 'processed')
      .orderBy('window_start')
      .execute();
    assert.deepEqual(
      processed.map((r) => iso(r.window_start!.getTime())),
      [starts[0], starts[2], starts[3]],
    );
    // The lost attempt is on record.
    const lost = await stack.t.db
      .selectFrom('job_runs')
      .select(['outcome', 'reason'])
      .where('job', '=', job)
      .where('window_start', '=', new Date(starts[1]!))
      .where('workflow_id', '=', `${job}/backfill`)
      .execute();
    assert.equal(lost.length, 1, JSON.stringify(lost));
    assert.equal(lost[0]!.outcome, 'failed');
    assert.match(lost[0]!.reason ?? '', /worker .*lost/);
    // And in the log, as the three outcome lines say every failure (it was a run record only).
    await eventually(
      async () =>
        new RegExp(`FAILED job=${job} window=${poison} attempt=1: attempt 1 of this batch ended`).test(
          second.output(),
        ) || undefined,
      10_000,
      'the FAILED line of the lost window',
    );
  } finally {
    for (const w of workers) await w.stop('SIGKILL');
  }
});
