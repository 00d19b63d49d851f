// Size probe for issue 14 (standalone, not part of `npm test` or bench/run.ts):
//   node --import tsx bench/ledger-size.ts [years=3]
// Seeds three years of one minutely job as the issue's probe did (every window done, with a window
// run record and a tick run record each; generate_series), then runs one window of the built-in
// housekeeping job's preparation (its batched deletions and the done markers' folding into spans,
// the real code, default retentions) and reports the database size and the bytes per done window
// before and after. Sizes are measured after VACUUM FULL (what the space holds live; plain VACUUM
// reuses freed space without shrinking files). With the default 3 years, merges `size.*` figures
// into bench/results.json (render BENCHMARKS.md with `npm run bench -- --render`).
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { ledger } from '../db/ledger-schema.js';
import type { Database } from '../db/schema.js';
import { housekeeping } from '../jobs/housekeeping/index.js';
import { defineJob } from '../schedules/define.js';
import { createTestDb } from '../test/helpers/db.js';
import { figure, type Figure } from './figures.js';

const years = Number(process.argv[2] ?? 3);
const job = 'probe-minutely';
const MB = 1024 * 1024;

async function sizes(db: Kysely<Database>, windows: number) {
  await sql`vacuum full analyze`.execute(db);
  const { schema } = ledger(db);
  const r = await sql<{ db: string; jw: string; sp: string; runs: string }>`
    select pg_database_size(current_database()) as db,
           pg_total_relation_size(${`${schema}.job_windows`}::regclass) as jw,
           pg_total_relation_size(${`${schema}.job_done_spans`}::regclass) as sp,
           pg_total_relation_size(${`${schema}.job_runs`}::regclass) as runs`.execute(db);
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
  const l = ledger(db);
  await sql`insert into ${l.job_watermarks} (job, watermark, updated_at) values (${job}, ${end}, now())`.execute(
    db,
  );
  await sql`
    insert into ${l.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger,
                             workflow_id, started_at, finished_at, duration_ms, records_in, records_applied, records_quarantined)
    select ${job}, s, 0, s + interval '1 minute', ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           'done', 1, 'tick', ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           s + interval '1 minute', s + interval '1 minute 2 seconds', 2000, 10, 10, 0
      from generate_series(${start}::timestamptz, ${end}::timestamptz - interval '1 minute', interval '1 minute') s`.execute(
    db,
  );
  await sql`
    insert into ${l.job_runs} (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at,
                          duration_ms, outcome, details)
    select 'window', ${job}, s, 0, ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 1,
           s + interval '1 minute', s + interval '1 minute 2 seconds', 2000, 'processed',
           '{"input": 10, "applied": 10, "quarantined": 0}'::jsonb
      from generate_series(${start}::timestamptz, ${end}::timestamptz - interval '1 minute', interval '1 minute') s`.execute(
    db,
  );
  await sql`
    insert into ${l.job_runs} (kind, job, workflow_id, attempt, started_at, finished_at, duration_ms, outcome, details)
    select 'tick', ${job}, 'tick-' || ${job} || '-' || extract(epoch from s)::bigint, 1,
           s + interval '1 minute', s + interval '1 minute 1 second', 1000, 'processed', '{"windows": 1}'::jsonb
      from generate_series(${start}::timestamptz, ${end}::timestamptz - interval '1 minute', interval '1 minute') s`.execute(
    db,
  );
  console.log(`seeded ${n} windows of ${job} (${years} y) in ${((Date.now() - t0) / 1000).toFixed(0)} s`);

  const seeded = await sizes(db, n);
  console.log('as seeded          ', seeded);

  const stateDir = await mkdtemp(join(tmpdir(), 'tidemark-size-'));
  const spec = housekeeping({ stateDir, budget: '1h' });
  const c0 = Date.now();
  const window = { start: new Date(end.getTime() - 86_400_000), end };
  await spec.prepare!({
    db: db.withoutPlugins(),
    ledger: db,
    job: defineJob(spec),
    window,
    key: `tidemark-housekeeping/${window.start.toISOString()}`,
    generation: 0,
    heartbeat: () => {},
    log: () => {},
  });
  const took = (Date.now() - c0) / 1000;
  await rm(stateDir, { recursive: true, force: true });
  const done = await sizes(db, n);
  console.log(`housekeeping window (deletions + folding) in ${took.toFixed(1)} s`);
  console.log('after housekeeping ', done);
  if (process.argv[2] === undefined) {
    const figures: Figure[] = [
      figure('size.seeded_mb', seeded.databaseMB, 'MB'),
      figure('size.after_housekeeping_mb', done.databaseMB, 'MB', {
        name: 'size.seeded_mb',
        value: seeded.databaseMB,
      }),
      figure('size.seeded_bytes_per_done_window', seeded.bytesPerDoneWindow, 'B'),
      figure('size.bytes_per_done_window', done.bytesPerDoneWindow, 'B', {
        name: 'size.seeded_bytes_per_done_window',
        value: seeded.bytesPerDoneWindow,
      }),
      figure('size.housekeeping_window_s', +took.toFixed(1), 's'),
    ];
    const file = new URL('../bench/results.json', import.meta.url);
    const saved = JSON.parse(await readFile(file, 'utf8')) as { results: Figure[] };
    saved.results = [...saved.results.filter((f) => !f.name.startsWith('size.')), ...figures];
    await writeFile(file, JSON.stringify(saved, null, 2) + '\n');
  }
} finally {
  await t.drop();
}
