// Compacted done markers on the real worker (issue 14): a backfill over windows whose markers were
// folded into a span runs none of them and reports them done; a rerun of one gets generation 1.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { memoryLogger } from '../../activities/logger.js';
import { compactDoneMarkers } from '../../db/compaction.js';
import { jobHealth } from '../../operator/job-health.js';
import { windowGrid } from '../../operator/window-grid.js';
import { defineCatalog } from '../../schedules/define.js';
import type { BackfillInput, BackfillResult } from '../../contract/workflows.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { approvedRerun } from '../helpers/reruns.js';
import { realStack, uniqueQueue, withWorker } from '../helpers/temporal.js';

const stack = realStack();
const FROM = '2025-03-01T00:00:00Z';
const TO = '2025-03-01T06:00:00Z';
const FAR = new Date('2030-01-01T00:00:00Z');

const windowRuns = async (job: string) =>
  Number(
    (
      await sql<{
        n: string;
      }>`select count(*) as n from job_runs where job = ${job} and kind = 'window'`.execute(stack.t.db)
    ).rows[0]!.n,
  );

test('a backfill over compacted windows runs none of them; a rerun of one gets generation 1', async () => {
  const job = 'spans-wf';
  const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: FROM })]);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, FROM, TO, 60, 5));
  const deps = { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() };
  await withWorker(stack.env, taskQueue, deps, async () => {
    const backfill = async (workflowId: string) =>
      (await stack.env.client.workflow.execute('backfill', {
        taskQueue,
        workflowId,
        args: [{ job, from: FROM, to: TO } satisfies BackfillInput],
      })) as BackfillResult;
    const first = await backfill(`${job}/backfill-1`);
    assert.equal(first.processed, 6);
    const runs = await windowRuns(job);

    assert.deepEqual(await compactDoneMarkers(stack.t.db, { cutoff: FAR }), { windows: 6, batches: 1 });
    const left = await stack.t.db
      .selectFrom('job_windows')
      .select('window_start')
      .where('job', '=', job)
      .execute();
    assert.deepEqual(left, [], 'every marker folded into the span');

    const grid = await windowGrid({
      db: stack.t.db,
      client: stack.env.client,
      job: catalog.get(job),
      now: FAR,
      from: FROM,
      to: TO,
    });
    assert.equal(grid.totals.done, 6, 'the grid shows the compacted windows done');
    assert.equal(grid.totals.missing, 0);
    const health = await jobHealth(stack.t.db, stack.env.client, catalog.get(job), new Date(TO));
    assert.deepEqual(
      [health.done, health.failed, health.missing],
      [6, 0, 0],
      "the overview's health counts the compacted windows done, none missing",
    );

    const again = await backfill(`${job}/backfill-2`);
    assert.equal(again.processed, 0);
    assert.equal(again.alreadyDone, 6);
    assert.deepEqual(again.failed, []);
    assert.equal(await windowRuns(job), runs, 'no window ran again');
    assert.equal(
      (await stack.t.db.selectFrom('job_windows').select('window_start').where('job', '=', job).execute())
        .length,
      0,
      'the refused windows wrote no marker',
    );

    await approvedRerun(stack.env.client, taskQueue, job, '2025-03-01T02:00:00Z');
    const marks = await stack.t.db
      .selectFrom('job_windows')
      .select(['generation', 'status'])
      .where('job', '=', job)
      .where('window_start', '=', new Date('2025-03-01T02:00:00Z'))
      .orderBy('generation')
      .execute();
    assert.deepEqual(marks, [
      { generation: 0, status: 'done' },
      { generation: 1, status: 'done' },
    ]);
    const spans = await stack.t.db
      .selectFrom('job_done_spans')
      .select(['span_start', 'span_end'])
      .where('job', '=', job)
      .orderBy('span_start')
      .execute();
    assert.deepEqual(
      spans.map((s) => `${s.span_start.toISOString()}-${s.span_end.toISOString()}`),
      [
        '2025-03-01T00:00:00.000Z-2025-03-01T02:00:00.000Z',
        '2025-03-01T03:00:00.000Z-2025-03-01T06:00:00.000Z',
      ],
    );
  });
});
