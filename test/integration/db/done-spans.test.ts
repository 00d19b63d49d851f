// Slim done markers (issue 14): contiguous done windows folded into spans stay done for every
// reader and for the claim; a claim racing compaction never applies a window twice; a kill during
// compaction loses nothing; compaction run again changes nothing.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { compactDoneMarkers, expandWindow } from '../../../db/compaction.js';
import { doneWindows, isDone, watermarkOf } from '../../../db/ledger.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';
import { eventually } from '../../helpers/temporal.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2024-01-01T00:00:00Z');
const at = (i: number) => new Date(T0 + i * HOUR);
const FAR = new Date('2030-01-01T00:00:00Z');
let t: TestDb;

before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

/** Windows [from, to) of the hourly job as markers (generation 0) with `status`. */
async function mark(job: string, from: number, to: number, status = 'done', generation = 0): Promise<void> {
  await sql`
    insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at, finished_at)
    select ${job}, ${at(0)}::timestamptz + i * interval '1 hour', ${generation}::int,
           ${at(0)}::timestamptz + (i + 1) * interval '1 hour', ${job} || '/' || i, ${status}, 1, 'manual', now(), now()
      from generate_series(${from}::int, ${to - 1}::int) i`.execute(t.db);
}

/** A job whose watermark is `watermark` (compaction never passes it). */
async function jobAt(job: string, watermark: Date): Promise<void> {
  await watermarkOf(t.db, job, watermark);
  await sql`update ${tm.job_watermarks} set watermark = ${watermark} where job = ${job}`.execute(t.db);
}

async function spans(job: string): Promise<string[]> {
  const rows = await t.db
    .selectFrom('job_done_spans')
    .select(['span_start', 'span_end'])
    .where('job', '=', job)
    .orderBy('span_start')
    .execute();
  const h = (d: Date) => (d.getTime() - T0) / HOUR;
  return rows.map((r) => `${h(r.span_start)}-${h(r.span_end)}`);
}

const markerCount = async (job: string) =>
  Number(
    (await sql<{ n: string }>`select count(*) as n from ${tm.job_windows} where job = ${job}`.execute(t.db))
      .rows[0]!.n,
  );

/** The claim function as a worker calls it, in its own transaction on session `c`. */
async function claim(c: pg.Client, job: string, i: number, hours = 1): Promise<number | null> {
  await c.query('begin');
  try {
    const r = await c.query<{ a: number | null }>(
      `select ${SCHEMA}.tidemark_claim_window($1, $2, 0, $3, $4, 'tick', 'wf', now(), '5000', '60000') as a`,
      [job, at(i), at(i + hours), `${job}/${i}`],
    );
    await c.query('commit');
    return r.rows[0]!.a;
  } catch (err) {
    await c.query('rollback');
    throw err;
  }
}

async function session(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: t.url });
  await c.connect();
  return c;
}

test('failed windows, other generations, open rerun requests and gaps break spans; the watermark and cutoff bound them', async () => {
  const job = 'spans-break';
  await jobAt(job, at(40));
  await mark(job, 0, 10);
  await mark(job, 10, 11, 'failed'); // failed: kept, breaks the chain
  await mark(job, 11, 15);
  // 15 never ran: a gap
  await mark(job, 16, 20);
  await mark(job, 20, 21, 'done', 1); // rerun generation 1 of window 20
  await mark(job, 20, 21);
  await mark(job, 21, 25);
  await mark(job, 25, 26);
  await t.db
    .insertInto('rerun_requests')
    .values({
      workflow_id: 'rr-25',
      job,
      window_start: at(25),
      generation: 1,
      reason: 'x',
      requested_by: 'a',
      status: 'pending',
    })
    .execute();
  await mark(job, 26, 45); // 40..44 past the watermark
  const r = await compactDoneMarkers(t.db, { cutoff: at(42), batch: 7 });
  assert.deepEqual(await spans(job), ['0-10', '11-15', '16-20', '21-25', '26-40']);
  assert.equal(r.windows, 10 + 4 + 4 + 4 + 14);
  // Left as markers: the failed one, both generations of 20, 25 (open request), 40..44.
  assert.equal(await markerCount(job), 1 + 2 + 1 + 5);
  // Window 10 done later: the spans either side join.
  await sql`update ${tm.job_windows} set status = 'done' where job = ${job} and window_start = ${at(10)}`.execute(
    t.db,
  );
  await compactDoneMarkers(t.db, { cutoff: at(42) });
  assert.deepEqual(await spans(job), ['0-15', '16-20', '21-25', '26-40']);
});

test('compaction run again changes nothing; compacted windows are done for the readers and the claim', async () => {
  const job = 'spans-idem';
  await jobAt(job, at(100));
  await mark(job, 0, 100);
  assert.deepEqual(await compactDoneMarkers(t.db, { cutoff: FAR, batch: 30 }), { windows: 100, batches: 4 });
  assert.deepEqual(await spans(job), ['0-100']);
  assert.deepEqual(await compactDoneMarkers(t.db, { cutoff: FAR, batch: 30 }), { windows: 0, batches: 0 });
  assert.deepEqual(await spans(job), ['0-100']);
  assert.equal(await markerCount(job), 0);

  assert.equal(await isDone(t.db, { job, start: at(42), generation: 0 }), true);
  assert.equal(await isDone(t.db, { job, start: at(100), generation: 0 }), false);
  const ws = [98, 99, 100, 101].map((i) => ({ start: at(i), end: at(i + 1) }));
  assert.deepEqual([...(await doneWindows(t.db, job, ws))], [at(98).getTime(), at(99).getTime()]);
  const c = await session();
  try {
    assert.equal(await claim(c, job, 0), null, 'a compacted window is done: the claim refuses it');
    assert.equal(await claim(c, job, 99), null);
    assert.equal(await markerCount(job), 0, 'the refused claims wrote no marker');
    assert.equal(await claim(c, job, 100), 1, 'the next window is claimed as before');
  } finally {
    await c.end();
  }
});

test('a window that starts in a span but ends past it is refused with the window and the span named', async () => {
  const job = 'spans-cross';
  await jobAt(job, at(24));
  await mark(job, 0, 24);
  await compactDoneMarkers(t.db, { cutoff: FAR });
  const day = { start: at(12), end: at(36) }; // the grid became daily
  await assert.rejects(doneWindows(t.db, job, [day]), (err: Error) => {
    assert.match(
      err.message,
      /window spans-cross\/2024-01-01T12:00:00\.000Z .* starts in the done span \[2024-01-01T00:00:00\.000Z, 2024-01-02T00:00:00\.000Z\)/,
    );
    assert.match(err.message, /ends past it/);
    return true;
  });
  const c = await session();
  try {
    await assert.rejects(claim(c, job, 12, 24), (err: Error) => {
      assert.match(
        err.message,
        /window spans-cross\/2024-01-01T12:00:00Z .* starts in the done span .* ends past it/,
      );
      return true;
    });
  } finally {
    await c.end();
  }
  assert.equal(await markerCount(job), 0, 'nothing claimed');
});

test('a window put back for a rerun splits its span and is a done marker again', async () => {
  const job = 'spans-expand';
  await jobAt(job, at(10));
  await mark(job, 0, 10);
  await compactDoneMarkers(t.db, { cutoff: FAR });
  const put = await t.db
    .transaction()
    .execute((trx) => expandWindow(trx, { job, start: at(4), end: at(5), key: `${job}/4` }));
  assert.equal(put, true);
  assert.deepEqual(await spans(job), ['0-4', '5-10']);
  assert.equal(await isDone(t.db, { job, start: at(4), generation: 0 }), true);
  assert.equal(await markerCount(job), 1);
  const edge = await t.db
    .transaction()
    .execute((trx) => expandWindow(trx, { job, start: at(9), end: at(10), key: `${job}/9` }));
  assert.equal(edge, true);
  assert.deepEqual(await spans(job), ['0-4', '5-9']);
  assert.equal(
    await t.db
      .transaction()
      .execute((trx) => expandWindow(trx, { job, start: at(4), end: at(5), key: `${job}/4` })),
    false,
    'a window not in a span is left alone',
  );
});

test('a claim racing compaction of its window never applies it twice (real concurrent sessions)', async () => {
  const c = await session();
  const iterations = 150;
  let doubles = 0;
  try {
    for (let k = 0; k < iterations; k++) {
      const job = `spans-race-${k}`;
      await jobAt(job, at(3));
      await mark(job, 0, 3);
      // Window 1 presented again while compaction folds it.
      const [claimed] = await Promise.all([claim(c, job, 1), compactDoneMarkers(t.db, { cutoff: FAR, job })]);
      if (claimed !== null) doubles++;
      const left = await markerCount(job);
      const folded = await spans(job);
      assert.ok(
        (left === 0 && folded.join() === '0-3') || (left === 3 && folded.length === 0),
        `iteration ${k}: markers ${left}, spans ${folded.join()}`,
      );
    }
  } finally {
    await c.end();
  }
  assert.equal(doubles, 0, `a done window was claimed again in ${doubles} of ${iterations} races`);
});

test('a compaction killed mid-batch rolls back whole; the next run completes it', async () => {
  const job = 'spans-kill';
  await jobAt(job, at(500));
  await mark(job, 0, 500);
  const blocker = await session();
  try {
    // Window 499's marker locked: the batch's delete waits on it, holding what it deleted so far.
    await blocker.query('begin');
    await blocker.query(
      `select 1 from ${SCHEMA}.job_windows where job = $1 and window_start = $2 for update`,
      [job, at(499)],
    );
    const run = compactDoneMarkers(t.db, { cutoff: FAR, lockTimeoutMs: 120_000 });
    // Handled from the start: its failure may come before the terminate's reply.
    run.catch(() => undefined);
    const pid = await eventually(
      async () => {
        const r = await sql<{ pid: number }>`
        select pid from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and query like '%with del as%'`.execute(
          t.db,
        );
        return r.rows.length === 1 ? r.rows[0]!.pid : undefined;
      },
      60_000,
      'the compaction batch waiting on the locked marker',
    );
    await sql`select pg_terminate_backend(${pid})`.execute(t.db);
    await assert.rejects(run, /terminat/);
    await blocker.query('rollback');
  } finally {
    await blocker.end();
  }
  assert.equal(await markerCount(job), 500, 'every marker is still there');
  assert.deepEqual(await spans(job), []);
  assert.deepEqual(await compactDoneMarkers(t.db, { cutoff: FAR }), { windows: 500, batches: 1 });
  assert.deepEqual(await spans(job), ['0-500']);
});
