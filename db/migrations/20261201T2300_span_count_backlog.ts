// The flat counts' backfill (20261201T2000) counted the spans already there by the length of the
// job's window rows; a job with no rows left (every marker folded: a job that stopped a while ago)
// got none of its spans counted, so the overview said its windows were missing. The database does
// not know a job's grid: the windows already in spans are left in job_span_backlog, and the
// overview (operator/job-health.ts, which has the catalog) counts them by the grid once and moves
// them into job_window_counts. Every job's counts are recounted here (latest generations from the
// rows, spans into the backlog), under a lock that waits for the window transactions in flight and
// holds new ones until the migration commits (as the trigger's creation did).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table job_span_backlog (
      job text not null,
      span_start timestamptz not null,
      span_end timestamptz not null,
      primary key (job, span_start)
    )`.execute(db);
  // Writers of job_windows and job_done_spans wait (compaction and expansion write both).
  await sql`lock table job_windows, job_done_spans in share mode`.execute(db);
  await sql`delete from job_window_counts`.execute(db);
  await sql`
    insert into job_window_counts (job, status, n)
    select job, status, count(*) from (
      select distinct on (job, window_start) job, status from job_windows order by job, window_start, generation desc) w
     group by job, status`.execute(db);
  await sql`insert into job_span_backlog (job, span_start, span_end)
            select job, span_start, span_end from job_done_spans`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop table job_span_backlog`.execute(db);
}
