// Hostile review of issue 10 (batched backfill, the local window attempt): what a SIGKILLed worker
// does to a batch's `processed` count.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CRASH_POINT } from '../../activities/crash-points.js';
import type { BackfillResult } from '../../workflows/types.js';
import { insertOrders, ordersBetween } from '../helpers/jobs.js';
import { spawnWorker, type WorkerProcess, workerProcessEnv } from '../helpers/processes.js';
import { eventually, realStack, uniqueQueue } from '../helpers/temporal.js';

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
    // Nothing but this backfill touched the job: it processed every window, and says so.
    const done = await stack.t.db
      .selectFrom('job_runs')
      .select('window_start')
      .where('job', '=', job)
      .where('outcome', '=', 'processed')
      .where('workflow_id', '=', workflowId)
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
