// The flat counts (20261201T2000) count a span's windows done, but
// - their backfill counted the spans already there by the length of the job's window rows: a job
//   with no rows left (every marker folded: a job that stopped a while ago) got none counted, and
// - nothing counted a span written or removed other than by compaction or expansion: a span removed
//   by hand (as the claim's "crosses a done span" error says to) stayed counted done, and its windows,
//   run again, were counted twice.
// The database does not know a job's grid: spans to count are left in job_span_backlog (+1 a span
// added, -1 one removed), and the overview (operator/job-health.ts, which has the catalog) counts
// them by the grid once and moves them into job_window_counts. A trigger on job_done_spans fills it,
// skipping compaction and expansion (tidemark.span_fold: their windows stay done). Every job's
// counts are recounted here (latest generations from the rows, spans into the backlog), under a
// lock that waits for the window transactions in flight and holds new ones until the migration
// commits (as the counting trigger's creation did).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table job_span_backlog (
      id bigserial primary key,
      job text not null,
      span_start timestamptz not null,
      span_end timestamptz not null,
      sign smallint not null check (sign in (-1, 1))
    )`.execute(db);
  await sql`create index job_span_backlog_job_idx on job_span_backlog (job)`.execute(db);
  await sql`
    create function tidemark_span_backlog() returns trigger language plpgsql volatile as $fn$
    begin
      if current_setting('tidemark.span_fold', true) = 'on' then
        return null;
      end if;
      if tg_op in ('INSERT', 'UPDATE') then
        insert into job_span_backlog (job, span_start, span_end, sign)
        select job, span_start, span_end, 1 from new_rows;
      end if;
      if tg_op in ('DELETE', 'UPDATE') then
        insert into job_span_backlog (job, span_start, span_end, sign)
        select job, span_start, span_end, -1 from old_rows;
      end if;
      return null;
    end
    $fn$`.execute(db);
  // Writers of job_windows and job_done_spans wait (compaction and expansion write both), and so do
  // folds of the counts (a fold committing during the recount would leave its sum on top of it).
  await sql`lock table job_windows, job_done_spans, job_window_counts in share mode`.execute(db);
  for (const op of ['insert', 'update', 'delete'] as const) {
    const rows =
      op === 'insert'
        ? sql`new table as new_rows`
        : op === 'delete'
          ? sql`old table as old_rows`
          : sql`old table as old_rows new table as new_rows`;
    await sql`create trigger ${sql.raw(`job_done_spans_backlog_${op}`)} after ${sql.raw(op)} on job_done_spans
      referencing ${rows} for each statement execute function tidemark_span_backlog()`.execute(db);
  }
  await sql`delete from job_window_counts`.execute(db);
  await sql`
    insert into job_window_counts (job, status, n)
    select job, status, count(*) from (
      select distinct on (job, window_start) job, status from job_windows order by job, window_start, generation desc) w
     group by job, status`.execute(db);
  await sql`insert into job_span_backlog (job, span_start, span_end, sign)
            select job, span_start, span_end, 1 from job_done_spans`.execute(db);
}
