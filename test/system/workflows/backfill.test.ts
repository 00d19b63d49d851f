// Backfill on the real server: a range across several continue-as-new pages, bounded
// concurrency, done windows skipped, progress visible while it runs, totals exact.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memoryLogger } from '../../../activities/logger.js';
import { readWatermark } from '../../../db/ledger.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { BackfillProgress, BackfillResult, TickResult } from '../../../contract/workflows.js';
import {
  gatedHandler,
  insertOrders,
  ordersBetween,
  reference,
  salesJob,
  summaryOf,
} from '../../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';

const stack = realStack();

test('backfill of 23 windows in pages of 5, 4 at once, 3 already done: exact totals, watermark follows', async () => {
  const job = 'bf';
  const gate = gatedHandler();
  const catalog = defineCatalog([
    salesJob(job, { grid: '1h', lateness: '0m', start: '2026-06-01T00:00:00Z', handler: gate.handler }),
  ]);
  const taskQueue = uniqueQueue(job);
  const logger = memoryLogger();
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger, now: () => new Date() },
    async () => {
      const orders = await insertOrders(
        stack.t.db,
        ordersBetween(job, '2026-06-01T00:00:00Z', '2026-06-02T00:00:00Z', 480, 17),
      );
      // A tick first does the first three windows (cap from the job default is 24, so limit with `now`).
      const tick = (await stack.env.client.workflow.execute('tick', {
        taskQueue,
        workflowId: `${job}/tick-1`,
        args: [{ job, now: '2026-06-01T03:00:00Z' }],
      })) as TickResult;
      for (const k of tick.started) await stack.env.client.workflow.getHandle(k).result();
      assert.equal(tick.started.length, 3);

      gate.hold(`${job}/2026-06-01T20:00:00Z`);
      const handle = await stack.env.client.workflow.start('backfill', {
        taskQueue,
        workflowId: `${job}/backfill`,
        args: [
          { job, from: '2026-06-01T00:00:00Z', to: '2026-06-01T23:00:00Z', concurrency: 4, pageSize: 5 },
        ],
      });
      await eventually(
        async () => (gate.entered(`${job}/2026-06-01T20:00:00Z`) ? true : undefined),
        60_000,
        'the backfill to reach 20:00',
      );
      const progress = await handle.query<BackfillProgress>('progress');
      assert.ok(progress.processed >= 15 && progress.inFlight >= 1, JSON.stringify(progress));
      assert.equal(progress.alreadyDone, 3);
      gate.release(`${job}/2026-06-01T20:00:00Z`);

      const result = (await handle.result()) as BackfillResult;
      assert.deepEqual(
        { ...result },
        {
          job,
          from: '2026-06-01T00:00:00Z',
          to: '2026-06-01T23:00:00Z',
          processed: 20,
          alreadyDone: 3,
          running: 0,
          failed: [],
        },
      );
      const desc = await handle.describe();
      assert.notEqual(desc.runId, handle.firstExecutionRunId, 'continued as new');
      assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), '2026-06-01T23:00:00.000Z');
      const ref = reference(orders, '2026-06-01T00:00:00Z', '2026-06-01T23:00:00Z');
      assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
      const runs = await stack.t.db
        .selectFrom('job_runs')
        .select(['kind', 'outcome'])
        .where('job', '=', job)
        .where('kind', '=', 'backfill')
        .execute();
      assert.deepEqual(runs, [{ kind: 'backfill', outcome: 'completed' }]);
      assert.ok(
        logger.lines.some(
          (l) => l.startsWith(`BACKFILL job=${job}`) && l.includes('processed=20 already-done=3'),
        ),
      );

      // Run again: everything is done, nothing is processed.
      const again = (await stack.env.client.workflow.execute('backfill', {
        taskQueue,
        workflowId: `${job}/backfill-2`,
        args: [{ job, from: '2026-06-01T00:00:00Z', to: '2026-06-01T23:00:00Z' }],
      })) as BackfillResult;
      assert.deepEqual([again.processed, again.alreadyDone], [0, 23]);
      assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
    },
  );
});
