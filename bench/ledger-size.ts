// Size probe for issue 14 (standalone, not part of `npm test` or bench/run.ts):
//   node --import tsx bench/ledger-size.ts [years=3]
// Seeds three years of one minutely job as the probe did (every window done, with a window
// run record and a tick run record each; generate_series), then reports the database size and the
// bytes per done window: as seeded, after compactDoneMarkers, and after deleting run records older
// than 90 days with plain SQL (standing in for the housekeeping job). Sizes are measured after
// VACUUM FULL (what the space holds live; plain VACUUM reuses freed space without shrinking files).
import { sql, type Kysely } from 'kysely';
import { compactDoneMarkers } from '../db/compaction.js';
import type { Database } from '../db/schema.js';
import { createTestDb } from '../test/helpers/db.js';

const years = Number(process.argv[2] ?? 3);
const job = 'probe-minutely';
const MB = 1024 * 1024;

async function sizes(db: Kysely<Database>, windows: number) {
  await sql`vacuum full analyze`.execute(db);
  const r = await sql<{ db: string; jw: string; sp: string; runs: string }>`
    select pg_database_size(current_database()) as db,
           pg_total_relation_size('job_windows') as jw,
           pg_total_relation_size('job_done_spans') as sp,
           pg_total_relation_size('job_runs') as runs`.execute(db);
  const s = r.rows[0]!;
  const markers = Number(s.jw) + Number(s.sp);
  return {
    databaseMB: +(Number(s.db) / MB).toFixed(1),
    jobWindowsMB: +(Number(s.jw) / MB).toFixed(1),
    doneSpansKB: +(Number(s.sp) / 1024).toFixed(1),
    jobRunsMB: +(Number(s.runs) / MB).toFixed(1),
    bytesPerDoneWindow: +(markers / windows).toFixed(2),
  };
}

const t = await createTestDb();
try {
  const db = t.db;
  const end = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 60 * 60_000);
  const start = new Date(end.getTime() - Math.round(years * 365 * 24 * 60) * 60_000);
  const n = Math.round((end.getTime() - start.getTime()) / 60_000);
  const t0 = Date.now();
  await sql`insert into job_watermarks (job, watermark, updated_at) values (${job}, ${end}, now())`.execute(
    db,
  );
  await sql`
    insert into job_windows (job, window_start, generation, window_end, window_key, status, attempts, trigger,
                             workflow_id, started_at, finished_at, duration_ms, records_in, records_applied, records_quarantined)
    select ${job}, s, 0, s + interval '1 minute', ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           'done', 1, 'tick', ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           s + interval '1 minute', s + interval '1 minute 2 seconds', 2000, 10, 10, 0
      from generate_series(${start}::timestamptz, ${end}::timestamptz - interval '1 minute', interval '1 minute') s`.execute(
    db,
  );
  await sql`
    insert into job_runs (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at,
                          duration_ms, outcome, details)
    select 'window', ${job}, s, 0, ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 1,
           s + interval '1 minute', s + interval '1 minute 2 seconds', 2000, 'processed',
           '{"input": 10, "applied": 10, "quarantined": 0}'::jsonb
      from generate_series(${start}::timestamptz, ${end}::timestamptz - interval '1 minute', interval '1 minute') s`.execute(
    db,
  );
  await sql`
    insert into job_runs (kind, job, workflow_id, attempt, started_at, finished_at, duration_ms, outcome, details)
    select 'tick', ${job}, 'tick-' || ${job} || '-' || extract(epoch from s)::bigint, 1,
           s + interval '1 minute', s + interval '1 minute 1 second', 1000, 'processed', '{"windows": 1}'::jsonb
      from generate_series(${start}::timestamptz, ${end}::timestamptz - interval '1 minute', interval '1 minute') s`.execute(
    db,
  );
  console.log(`seeded ${n} windows of ${job} (${years} y) in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  console.log('as seeded          ', await sizes(db, n));

  const c0 = Date.now();
  const cutoff = new Date(end.getTime() - 90 * 24 * 3_600_000);
  const r = await compactDoneMarkers(db, { cutoff, batch: 10_000 });
  console.log(
    `compacted ${r.windows} windows older than 90 d in ${r.batches} batches, ${((Date.now() - c0) / 1000).toFixed(1)} s`,
  );
  console.log('after compaction   ', await sizes(db, n));

  await sql`delete from job_runs where started_at < ${cutoff}`.execute(db);
  console.log('runs > 90 d deleted', await sizes(db, n));
} finally {
  await t.drop();
}
