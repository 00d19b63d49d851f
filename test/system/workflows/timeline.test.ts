// The worked example's timeline, on a real Temporal server and PostgreSQL:
// catch-up after a missed tick, a tick while the previous one's windows run, a repeat with
// nothing new, and a window presented again by hand.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memoryLogger } from '../../../activities/logger.js';
import { readWatermark } from '../../../db/ledger.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowResult } from '../../../contract/workflows.js';
import {
  gatedHandler,
  insertOrders,
  ordersBetween,
  reference,
  salesJob,
  summaryOf,
} from '../../helpers/jobs.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  withWorker,
  tickAt,
  windowByHand,
} from '../../helpers/temporal.js';

const stack = realStack();

test('timeline: catch-up, running, nothing new, already done', async () => {
  const job = 'timeline';
  const gate = gatedHandler();
  const catalog = defineCatalog([salesJob(job, { start: '2026-03-02T09:00:00Z', handler: gate.handler })]);
  const logger = memoryLogger();
  const taskQueue = uniqueQueue('timeline');
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger, now: () => new Date() },
    async () => {
      const client = stack.env.client;
      const orders = await insertOrders(stack.t.db, [
        ...ordersBetween('a', '2026-03-02T09:00:00Z', '2026-03-02T12:00:00Z', 180, 25),
        ...ordersBetween('open', '2026-03-02T12:00:00Z', '2026-03-02T12:07:00Z', 7),
      ]);
      const tick = (now: string) => tickAt(client, taskQueue, job, now);
      const windowResult = (key: string) => client.workflow.getHandle(key).result() as Promise<WindowResult>;

      // 10:05, run #1: the 09:00 window.
      const r1 = await tick('2026-03-02T10:05:00Z');
      assert.deepEqual(r1.started, ['timeline/2026-03-02T09:00:00Z']);
      assert.equal((await windowResult(r1.started[0]!)).outcome, 'processed');
      assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), '2026-03-02T10:00:00.000Z');

      // 11:05: missed (no tick). 12:05, run #2: both closed windows, oldest first; held open.
      const w10 = 'timeline/2026-03-02T10:00:00Z';
      const w11 = 'timeline/2026-03-02T11:00:00Z';
      gate.hold(w10);
      gate.hold(w11);
      const r2 = await tick('2026-03-02T12:05:00Z');
      assert.deepEqual(r2.started, [w10, w11]);
      assert.equal(r2.watermark, '2026-03-02T10:00:00Z');
      await eventually(
        async () => (gate.entered(w10) && gate.entered(w11) ? true : undefined),
        20_000,
        'both windows in their handler',
      );

      // 12:07, run #3 by hand while #2's windows still run.
      const r3 = await tick('2026-03-02T12:07:00Z');
      assert.deepEqual(r3.started, []);
      assert.deepEqual(r3.running, [w10, w11]);
      assert.ok(logger.lines.includes(`SKIPPED reason=running job=${job} window=${w10}`));
      assert.ok(logger.lines.includes(`SKIPPED reason=running job=${job} window=${w11}`));

      gate.release(w10);
      gate.release(w11);
      assert.equal((await windowResult(w10)).outcome, 'processed');
      assert.equal((await windowResult(w11)).outcome, 'processed');
      assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), '2026-03-02T12:00:00.000Z');

      // After #2: nothing closed is left; the open 12:00 window is not touched.
      const r4 = await tick('2026-03-02T12:07:00Z');
      assert.deepEqual([r4.started, r4.running, r4.alreadyDone], [[], [], 0]);

      // The 10:00 window presented again by hand.
      const again = await windowByHand(
        client,
        taskQueue,
        job,
        '2026-03-02T10:00:00Z',
        '2026-03-02T11:00:00Z',
      );
      assert.equal(again.outcome, 'already-done');
      assert.ok(logger.lines.includes(`SKIPPED reason=already-done job=${job} window=${w10}`));

      // Totals equal an independent reference over [09:00, 12:00); the open window is not in them.
      const ref = reference(orders, '2026-03-02T09:00:00Z', '2026-03-02T12:00:00Z');
      assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
      const quarantined = await stack.t.db
        .selectFrom('quarantine')
        .select(({ fn }) => fn.countAll<number>().as('n'))
        .where('job', '=', job)
        .executeTakeFirstOrThrow();
      assert.equal(quarantined.n, ref.bad);
      assert.ok(ref.bad > 0 && ref.count > 0);
      const windows = await stack.t.db
        .selectFrom('job_windows')
        .selectAll()
        .where('job', '=', job)
        .orderBy('window_start')
        .execute();
      assert.deepEqual(
        windows.map((w) => [
          w.window_key,
          w.status,
          w.records_in,
          (w.records_applied ?? 0) + (w.records_quarantined ?? 0),
        ]),
        windows.map((w) => [w.window_key, 'done', w.records_in, w.records_in]),
      );
      assert.equal(windows.length, 3);
      assert.equal(logger.lines.filter((l) => l.startsWith('PROCESSED')).length, 3);
    },
  );
});
