// The ledger's cost per window must not grow with the job's history. The watermark advance walks
// the done windows from the watermark; the planner must not be free to read all of the job's done
// windows to do it (it did: before statistics existed it hashed every done window, per commit).
// Counted in the rows the statement reads (pg_stat_xact_user_tables), not in time.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { watermarkOf } from '../../../db/ledger.js';
import type { Database } from '../../../db/schema.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-01-01T00:00:00Z');
let t: TestDb;

before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

/** Marks windows [from, to) of the job done (generation 0) in one statement. */
async function doneWindows(db: Kysely<Database>, job: string, from: number, to: number): Promise<void> {
  await sql`
    insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at, finished_at)
    select ${job}, ${new Date(T0)}::timestamptz + i * interval '1 hour', 0,
           ${new Date(T0)}::timestamptz + (i + 1) * interval '1 hour', ${job} || ':' || i, 'done', 1, 'manual', now(), now()
      from generate_series(${from}::int, ${to - 1}::int) i`.execute(db);
}

/**
 * Rows of job_windows read by `run` (index fetches and sequential reads). The backend's counters
 * not yet reported hold earlier transactions' reads too: the difference is taken in one transaction.
 */
async function rowsRead(run: (trx: Kysely<Database>) => Promise<unknown>): Promise<number> {
  const reads = async (trx: Kysely<Database>) =>
    Number(
      (
        await sql<{ n: string }>`
          select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n
            from pg_stat_xact_user_tables where schemaname = ${SCHEMA} and relname = 'job_windows'`.execute(
          trx,
        )
      ).rows[0]?.n ?? 0,
    );
  return await t.db.transaction().execute(async (trx) => {
    const before = await reads(trx);
    await run(trx);
    return (await reads(trx)) - before;
  });
}

test('moving the watermark reads the windows it passes, not the job history (no statistics yet)', async () => {
  const job = 'flat-history';
  await watermarkOf(t.db, job, new Date(T0));
  // A year of done windows after a gap at window 0: the watermark cannot move past the gap.
  await doneWindows(t.db, job, 1, 8_761);
  const stuck = await rowsRead((trx) =>
    sql`select ${tm.fn('tidemark_advance_watermark')}(${job}, ${new Date(T0)}::timestamptz)`.execute(trx),
  );
  assert.ok(stuck <= 2, `a watermark that cannot move read ${stuck} windows`);
  // Window 0 done: the watermark passes all 8,761 in one walk, one lookup each.
  await doneWindows(t.db, job, 0, 1);
  const walked = await rowsRead((trx) =>
    sql`select ${tm.fn('tidemark_advance_watermark')}(${job}, ${new Date(T0)}::timestamptz)`.execute(trx),
  );
  assert.ok(walked <= 8_762, `passing 8,761 windows read ${walked}`);
  assert.equal(
    (await watermarkOf(t.db, job, new Date(T0))).toISOString(),
    new Date(T0 + 8_761 * HOUR).toISOString(),
  );
  // Next to it, one more window: one lookup, not the 8,761 behind.
  await doneWindows(t.db, job, 8_761, 8_762);
  const next = await rowsRead((trx) =>
    sql`select ${tm.fn('tidemark_advance_watermark')}(${job}, ${new Date(T0 + 8_761 * HOUR)}::timestamptz)`.execute(
      trx,
    ),
  );
  assert.ok(next <= 3, `one window past the watermark read ${next}`);
});

test('the finish of a window in a job with a long history reads a handful of windows', async () => {
  const job = 'flat-finish';
  await watermarkOf(t.db, job, new Date(T0));
  await doneWindows(t.db, job, 0, 5_000);
  await watermarkOf(t.db, job, new Date(T0));
  // A claimed window two past the watermark's next (a gap): the finish must not scan the history.
  const start = new Date(T0 + 5_001 * HOUR);
  const read = await rowsRead(async (trx) => {
    await sql`insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at)
      values (${job}, ${start}, 0, ${new Date(start.getTime() + HOUR)}, 'k', 'done', 1, 'manual', now())`.execute(
      trx,
    );
    await sql`select ${tm.fn('tidemark_finish_window')}(${job}, ${start}::timestamptz, 0, 1, 1, 0, now(), now(), 'wf', 1, '{}'::jsonb)`.execute(
      trx,
    );
  });
  assert.ok(read <= 5, `the finish read ${read} windows`);
});
