// Hostile review of slim done markers (issue 14): readers that must still show compacted windows
// done, and a failed attempt recorded for a window whose marker was folded into a span.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { compactDoneMarkers, expandWindow } from '../../db/compaction.js';
import { failAttempt, watermarkOf } from '../../db/ledger.js';
import { jobHealth } from '../../operator/job-health.js';
import { windowDetail } from '../../operator/window-detail.js';
import { windowGrid } from '../../operator/window-grid.js';
import { defineCatalog } from '../../schedules/define.js';
import { salesJob } from '../helpers/jobs.js';
import { eventually, realStack } from '../helpers/temporal.js';

const stack = realStack();
const HOUR = 3_600_000;
const T0 = Date.parse('2025-03-01T00:00:00Z');
const at = (i: number) => new Date(T0 + i * HOUR);
const iso = (i: number) => at(i).toISOString().replace('.000Z', 'Z');
const FAR = new Date('2030-01-01T00:00:00Z');

/** Windows [0, n) of the hourly job done at generation 0, its watermark at n. */
async function doneHours(job: string, n: number): Promise<void> {
  await sql`
    insert into job_windows (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at, finished_at)
    select ${job}, ${at(0)}::timestamptz + i * interval '1 hour', 0,
           ${at(0)}::timestamptz + (i + 1) * interval '1 hour',
           ${job} || '/' || to_char((${at(0)}::timestamptz + i * interval '1 hour') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           'done', 1, 'tick', now(), now()
      from generate_series(0, ${n - 1}::int) i`.execute(stack.t.db);
  await watermarkOf(stack.t.db, job, at(n));
  await sql`update job_watermarks set watermark = ${at(n)} where job = ${job}`.execute(stack.t.db);
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
        `select tidemark_claim_window($1, $2, 0, $3, $4, 'backfill', 'wf', now(), '200', '60000')`,
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
    c.query(`select tidemark_claim_window($1, $2, 0, $3, $4, 'tick', 'wf', now(), '60000', '120000')`, [
      job,
      at(i),
      at(i + 1),
      `${job}/${iso(i)}`,
    ]);
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
