// Compacted done markers (done spans) on the real stack: a backfill over windows whose markers were
// folded into a span runs none of them and reports them done; a rerun of one gets generation 1. The
// overview and the window detail show compacted windows done; a failed attempt of a compacted window
// leaves no failed row in the span; compaction waiting on a window transaction holds no claim up.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { memoryLogger } from '../../../activities/logger.js';
import { compactDoneMarkers, expandWindow } from '../../../db/compaction.js';
import { jobHealth } from '../../../operator/job-health.js';
import { windowGrid } from '../../../operator/window-grid.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { BackfillInput, BackfillResult } from '../../../contract/workflows.js';
import { failAttempt, watermarkOf } from '../../../db/ledger.js';
import { windowDetail } from '../../../operator/window-detail.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { approvedRerun } from '../../helpers/reruns.js';
import { realStack, uniqueQueue, withWorker, eventually } from '../../helpers/temporal.js';
import { SCHEMA, tm } from '../../helpers/db.js';

const stack = realStack();
const FROM = '2025-03-01T00:00:00Z';
const TO = '2025-03-01T06:00:00Z';
const FAR = new Date('2030-01-01T00:00:00Z');

const windowRuns = async (job: string) =>
  Number(
    (
      await sql<{
        n: string;
      }>`select count(*) as n from ${tm.job_runs} where job = ${job} and kind = 'window'`.execute(stack.t.db)
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

// Readers that must still show compacted windows done, and a failed attempt recorded for a window
// whose marker was folded into a span. On a Temporal namespace and database of their own.
describe('readers of compacted windows, and a failed attempt or a claim meeting compaction', () => {
  const stack = realStack();
  const HOUR = 3_600_000;
  const T0 = Date.parse('2025-03-01T00:00:00Z');
  const at = (i: number) => new Date(T0 + i * HOUR);
  const iso = (i: number) => at(i).toISOString().replace('.000Z', 'Z');
  const FAR = new Date('2030-01-01T00:00:00Z');

  /** Windows [0, n) of the hourly job done at generation 0, its watermark at n. */
  async function doneHours(job: string, n: number): Promise<void> {
    await sql`
    insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at, finished_at)
    select ${job}, ${at(0)}::timestamptz + i * interval '1 hour', 0,
           ${at(0)}::timestamptz + (i + 1) * interval '1 hour',
           ${job} || '/' || to_char((${at(0)}::timestamptz + i * interval '1 hour') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           'done', 1, 'tick', now(), now()
      from generate_series(0, ${n - 1}::int) i`.execute(stack.t.db);
    await watermarkOf(stack.t.db, job, at(n));
    await sql`update ${tm.job_watermarks} set watermark = ${at(n)} where job = ${job}`.execute(stack.t.db);
  }

  test('the overview health and the window detail show compacted windows done (not missing, and rerunnable)', async () => {
    const job = 'rev-spans-readers';
    const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: iso(0) })]);
    await doneHours(job, 6);
    const now = at(6);
    const before = await jobHealth(stack.t.db, stack.env.client, catalog.get(job), now);
    assert.equal((await compactDoneMarkers(stack.t.db, { cutoff: FAR })).windows, 6);
    const after = await jobHealth(stack.t.db, stack.env.client, catalog.get(job), now);
    assert.deepEqual(
      { done: after.done, failed: after.failed, missing: after.missing },
      { done: before.done, failed: before.failed, missing: before.missing },
      'compaction changes nothing the overview says about a job',
    );
    const detail = await windowDetail({
      db: stack.t.db,
      client: stack.env.client,
      config: { TIDEMARK_WEB_UI_URL: 'http://ui.test:8233', TEMPORAL_NAMESPACE: 'default' },
      job: catalog.get(job),
      key: `${job}/${iso(2)}`,
      now,
    });
    assert.equal(detail.state, 'done', 'a compacted window is done in its detail');
    assert.equal(detail.rerunnable, true, 'and the page offers its rerun, as before compaction');
  });

  test('a failed attempt of a compacted window (its claim timed out behind compaction) leaves no failed row in the span', async () => {
    const job = 'rev-spans-fail';
    const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: iso(0) })]);
    await doneHours(job, 6);
    assert.equal((await compactDoneMarkers(stack.t.db, { cutoff: FAR })).windows, 6);
    // The window presented again while compaction holds the job's span lock: its claim times out.
    const holder = new pg.Client({ connectionString: stack.t.url });
    const claimer = new pg.Client({ connectionString: stack.t.url });
    await holder.connect();
    await claimer.connect();
    try {
      await holder.query('begin');
      await holder.query('select pg_advisory_xact_lock(1414, hashtext($1))', [job]);
      await claimer.query('begin');
      await assert.rejects(
        claimer.query(
          `select ${SCHEMA}.tidemark_claim_window($1, $2, 0, $3, $4, 'backfill', 'wf', now(), '200', '60000')`,
          [job, at(2), at(3), `${job}/${iso(2)}`],
        ),
        /lock timeout/,
      );
      await claimer.query('rollback');
      // The activity records the failed attempt (processWindow's catch), while compaction still runs.
      const failing = failAttempt(
        stack.t.db,
        { job, start: at(2), end: at(3), generation: 0, key: `${job}/${iso(2)}` },
        {
          trigger: 'backfill',
          workflowId: 'wf',
          at: new Date(),
          reason: 'canceling statement due to lock timeout',
        },
      );
      await holder.query('commit');
      await failing;
    } finally {
      await holder.end();
      await claimer.end();
    }
    const rows = await stack.t.db
      .selectFrom('job_windows')
      .select(['window_start', 'status'])
      .where('job', '=', job)
      .execute();
    assert.deepEqual(rows, [], 'a window done in a span gets no failed row');
    const grid = await windowGrid({
      db: stack.t.db,
      client: stack.env.client,
      job: catalog.get(job),
      now: FAR,
      from: iso(0),
      to: iso(6),
    });
    assert.deepEqual(
      { done: grid.totals.done, failed: grid.totals.failed },
      { done: 6, failed: 0 },
      'the grid shows the window done',
    );
    // A rerun can still be asked for it: its marker is put back from the span.
    await stack.t.db
      .transaction()
      .execute((trx) => expandWindow(trx, { job, start: at(2), end: at(3), key: `${job}/${iso(2)}` }));
  });

  test('compaction waiting for a window transaction in flight does not hold up the job’s new claims', async () => {
    const job = 'rev-spans-queue';
    await doneHours(job, 6);
    const inFlight = new pg.Client({ connectionString: stack.t.url });
    const next = new pg.Client({ connectionString: stack.t.url });
    await inFlight.connect();
    await next.connect();
    const claim = (c: pg.Client, i: number) =>
      c.query(
        `select ${SCHEMA}.tidemark_claim_window($1, $2, 0, $3, $4, 'tick', 'wf', now(), '60000', '120000')`,
        [job, at(i), at(i + 1), `${job}/${iso(i)}`],
      );
    try {
      // A window's transaction holds the span lock shared from its claim to its commit (its handler runs).
      await inFlight.query('begin');
      await claim(inFlight, 7);
      let settled = false;
      let busy = false;
      const compaction = compactDoneMarkers(stack.t.db, {
        cutoff: FAR,
        job,
        lockTimeoutMs: 20_000,
        onBusy: () => (busy = true),
      }).finally(() => {
        settled = true;
      });
      // Compaction found the job busy: it polls, or its lock request is queued.
      await eventually(
        async () => {
          const r = await sql<{ n: number }>`
          select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted`.execute(
            stack.t.db,
          );
          return busy || r.rows[0]!.n > 0 || undefined;
        },
        20_000,
        'compaction to wait for the window in flight',
      );
      // The next window of the job is claimed and committed while compaction still waits.
      await next.query('begin');
      await claim(next, 8);
      await next.query('commit');
      assert.equal(settled, false, 'the new claim did not wait for compaction to give up');
      await inFlight.query('commit');
      assert.equal((await compaction).windows, 6, 'compaction folds the windows once the window committed');
    } finally {
      await inFlight.end();
      await next.end();
    }
  });
});
