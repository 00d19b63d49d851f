// Years of history in the ledger: a seed made with generate_series (three years of a minutely job
// and two hourly ones, their run records, effects, attempts, incidents, quarantine) for the
// product's hot operations (bench/scale-operations.ts) to run over. Shared by
// test/system/bench/scale.test.ts (plans and buffers) and bench/scale.ts (time).
import { sql, type Kysely } from 'kysely';
import { ledger } from '../db/ledger-schema.js';
import type { Database } from '../db/schema.js';
import { type Catalog } from '../schedules/job.js';
import { defineCatalog } from '../schedules/define.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

/** The ledger's "now": every seeded window ends at or before it. */
export const SCALE_NOW = new Date('2026-11-30T00:00:00Z');
export const MINUTELY = 'scale-minutely';
export const HOURLY = ['scale-hourly-a', 'scale-hourly-b'] as const;

export function scaleCatalog(): Catalog {
  const handler = async () => ({ input: 0, applied: 0, quarantined: 0 });
  return defineCatalog([
    { name: MINUTELY, grid: '1m', timezone: 'UTC', lateness: '0s', handler },
    ...HOURLY.map((name) => ({ name, grid: '1h', timezone: 'Europe/Berlin', lateness: '5m', handler })),
  ]);
}

/**
 * Seeds the windows of every job that start in [from, to) as done (generation 0), each with a
 * window run record and a tick run record; per hourly window an e-mail effect with one attempt; a
 * closed incident a day per job; a quarantined record every 1,000 minutely windows. Every 10,000th
 * window failed once before it was done (attempts 2, a failed run). Rows go in in time order, as
 * the product writes them. Moves each job's watermark to `to`.
 */
export async function seedHistory(
  db: Kysely<Database>,
  from: Date,
  to: Date,
  log: (line: string) => void = () => undefined,
): Promise<void> {
  const t0 = performance.now();
  const lap = (what: string) => log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const t = ledger(db);
  // Secondary indexes are built once after the rows are in (as the migrations define them, read
  // back from the catalog), not kept up row by row: minutes become seconds.
  const secondary = (
    await sql<{ name: string; def: string }>`
      select i.indexname as name, i.indexdef as def from pg_indexes i
       where i.schemaname = ${t.schema} and i.tablename in ('job_windows', 'job_runs', 'effects', 'effect_attempts')
         and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`.execute(db)
  ).rows;
  for (const i of secondary) await sql`drop index ${sql.id(t.schema, i.name)}`.execute(db);
  const jobs = [{ job: MINUTELY, step: MINUTE }, ...HOURLY.map((job) => ({ job, step: HOUR }))];
  await Promise.all([
    // Windows and their run records on connections of their own: two cores, two writers.
    (async () => {
      for (const { job, step } of jobs)
        await sql`
          insert into ${t.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger,
                                   workflow_id, started_at, finished_at, duration_ms, records_in, records_applied,
                                   records_quarantined)
          select ${job}, s, 0, s + ${`${step} milliseconds`}::interval,
                 ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'done',
                 case when n % 10000 = 0 then 2 else 1 end, 'schedule',
                 ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                 s + ${`${step} milliseconds`}::interval + interval '2 seconds',
                 s + ${`${step} milliseconds`}::interval + interval '3 seconds', 1000, 10, 10, 0
            from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond',
                                 ${`${step} milliseconds`}::interval) with ordinality as g(s, n)`.execute(db);
      lap('windows');
    })(),
    (async () => {
      // A tick record, then the window's record, window by window, as the product writes them: the
      // newest ids are the busiest job's (the minutely one, seeded last) and its kinds interleave.
      for (const { job, step } of [...jobs].reverse())
        await sql`
          insert into ${t.job_runs} (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at,
                                duration_ms, outcome, details)
          select r.kind, ${job}, case when r.tick then null else s end, case when r.tick then null else 0 end,
                 ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                 case when r.tick then null when n % 10000 = 0 then 2 else 1 end,
                 r.at, r.at + interval '1 second',
                 1000, r.outcome, case when r.tick then ${'{"started":1,"alreadyDone":0}'}::jsonb
                                       else ${'{"input":10,"applied":10,"quarantined":0}'}::jsonb end
            from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond',
                                 ${`${step} milliseconds`}::interval) with ordinality as g(s, n)
           cross join lateral (values ('tick', true, s + ${`${step} milliseconds`}::interval, 'started'),
                 ('window', false, s + ${`${step} milliseconds`}::interval + interval '2 seconds', 'processed'))
                 as r(kind, tick, at, outcome)`.execute(db);
      lap('runs');
    })(),
  ]);
  for (const { job, step } of jobs)
    await sql`
      insert into ${t.job_runs} (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at,
                            duration_ms, outcome, reason)
      select 'window', ${job}, s, 0, ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 1,
             s + ${`${step} milliseconds`}::interval, s + ${`${step} milliseconds`}::interval + interval '1 second',
             1000, 'failed', 'handler error'
        from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond',
                             ${`${step} milliseconds`}::interval) with ordinality as g(s, n)
       where n % 10000 = 0`.execute(db);
  lap('windows and runs');
  for (const job of HOURLY) {
    await sql`
      insert into ${t.effects} (effect_key, job, window_key, name, channel, policy, status, fence, attempts, request,
                           provider_key, provider_id, created_at, begun_at, done_at, updated_at)
      select k || ':report', ${job}, k, 'report', 'email', 'ask', 'done', 1, 1,
             '{"to":["ops@example.com"],"subject":"report"}'::jsonb, k || ':report', 'msg-' || n, e, e, e, e
        from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond', interval '1 hour')
             with ordinality as g(s, n),
             lateral (select ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as k,
                             s + interval '1 hour 3 seconds' as e) x`.execute(db);
    await sql`
      insert into ${t.effect_attempts} (effect_key, fence, started_at, finished_at, duration_ms, outcome, provider_id)
      select effect_key, 1, begun_at, done_at, 200, 'done', provider_id from ${t.effects}
       where job = ${job} and created_at >= ${from} order by created_at`.execute(db);
  }
  // A few effects in doubt, as an operator would leave them for a while: the last three of one job.
  await sql`
    update ${t.effects} set status = 'unknown', last_error = 'reply lost'
     where effect_key in (select effect_key from ${t.effects} where job = ${HOURLY[0]} order by created_at desc limit 3)`.execute(
    db,
  );
  for (const { job } of jobs) {
    await sql`
      insert into ${t.incidents} (job, subject, kind, opened_at, closed_at, occurrences, last_error)
      select ${job}, ${job} || '/' || to_char(d at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'window', d,
             d + interval '10 minutes', 2, 'handler error'
        from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond', interval '1 day') d`.execute(
      db,
    );
  }
  await sql`
    insert into ${t.quarantine} (job, window_start, generation, record_key, reason, payload, created_at)
    select ${MINUTELY}, s, 0, 'order-' || n, 'amount: missing', '{}'::jsonb, s + interval '1 minute'
      from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond', interval '1000 minutes')
           with ordinality as g(s, n)`.execute(db);
  for (const { job } of jobs)
    await sql`
      insert into ${t.job_watermarks} (job, watermark, updated_at) values (${job}, ${to}, ${to})
      on conflict (job) do update set watermark = greatest(job_watermarks.watermark, excluded.watermark)`.execute(
      db,
    );
  lap('effects, incidents, quarantine');
  await Promise.all(secondary.map((i) => sql.raw(i.def).execute(db)));
  lap('indexes');
  await sql`vacuum analyze`.execute(db);
  lap('vacuum analyze');
}

/** Three years before SCALE_NOW, less the last day (seeded first, as the baseline). */
export const HISTORY_FROM = new Date(SCALE_NOW.getTime() - 3 * 365 * DAY);
export const RECENT_FROM = new Date(SCALE_NOW.getTime() - DAY);
