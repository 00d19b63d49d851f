// A window's commit in one round trip: the statements that end a claimed window (lock the job's
// watermark row, store the counts, record the run, move the watermark) run inside one server
// function. In a volatile PL/pgSQL function each statement takes a fresh snapshot, so the
// statements after the lock see every window of the job committed before it, exactly as when
// they were sent one by one (a single statement could not: its snapshot predates the lock wait).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Moves the job's watermark forward from p_from over its contiguous done windows (generation
  // 0), hopping from each to the next by its key (an index lookup each); null when it did not move.
  await sql`
    create function tidemark_advance_watermark(p_job text, p_from timestamptz)
    returns timestamptz language plpgsql volatile as $fn$
    declare
      moved timestamptz;
    begin
      -- PL/pgSQL, not SQL: its plan is kept for the session instead of made again on each call.
      with recursive chain(window_end) as (
        select p_from
        union all
        select jw.window_end from chain
          join job_windows jw on jw.job = p_job and jw.window_start = chain.window_end
                             and jw.generation = 0 and jw.status = 'done'
      )
      update job_watermarks set watermark = c.new_watermark, updated_at = now()
        from (select max(window_end) as new_watermark from chain) c
       where job = p_job and c.new_watermark > job_watermarks.watermark
      returning job_watermarks.watermark into moved;
      return moved;
    end
    $fn$`.execute(db);
  await sql`
    create function tidemark_finish_window(
      p_job text, p_start timestamptz, p_generation integer,
      p_input integer, p_applied integer, p_quarantined integer,
      p_started_at timestamptz, p_finished_at timestamptz, p_workflow_id text, p_attempt integer,
      p_details jsonb
    ) returns timestamptz language plpgsql volatile as $fn$
    declare
      locked timestamptz;
      moved timestamptz;
      took integer := (extract(epoch from p_finished_at - p_started_at) * 1000)::integer;
    begin
      -- Serialises the commits of one job's windows: two finishing together cannot leave it short.
      select watermark into locked from job_watermarks where job = p_job for update;
      update job_windows
         set records_in = p_input, records_applied = p_applied, records_quarantined = p_quarantined,
             finished_at = p_finished_at, duration_ms = took
       where job = p_job and window_start = p_start and generation = p_generation;
      insert into job_runs (kind, job, window_start, generation, workflow_id, attempt, started_at,
                            finished_at, duration_ms, outcome, details)
      values ('window', p_job, p_start, p_generation, p_workflow_id, p_attempt, p_started_at,
              p_finished_at, took, 'processed', p_details);
      moved := tidemark_advance_watermark(p_job, locked);
      return coalesce(moved, locked);
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function tidemark_finish_window(text, timestamptz, integer, integer, integer, integer,
    timestamptz, timestamptz, text, integer, jsonb)`.execute(db);
  await sql`drop function tidemark_advance_watermark(text, timestamptz)`.execute(db);
}
