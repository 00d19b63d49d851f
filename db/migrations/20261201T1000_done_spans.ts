// Slim done markers (issue 14): contiguous done generation-0 windows older than a cutoff are folded
// into one row per chain, job_done_spans [span_start, span_end), by compactDoneMarkers (db/compaction.ts).
// A window whose start lies in a span is done when it also ends in it; one that ends past the span
// (the job's windowing changed) is refused, never guessed. Expand only: the claim function keeps its
// signature, so workers of the previous version call the new body and see the spans too.
// A span holds no window count: it could not be split exactly for an irregular (calendar) grid, and
// the grid gives it back when needed.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table job_done_spans (
      job text not null,
      span_start timestamptz not null,
      span_end timestamptz not null,
      compacted_at timestamptz not null default now(),
      constraint job_done_spans_pk primary key (job, span_start),
      constraint job_done_spans_half_open check (span_end > span_start)
    )`.execute(db);
  // The claim first takes the job's span lock shared (compaction takes it exclusive): a window is
  // never compacted between this check and the upsert below, and a span committed before the lock
  // was granted is seen (READ COMMITTED: each statement reads anew).
  await sql`
    create or replace function tidemark_claim_window(
      p_job text, p_start timestamptz, p_generation integer, p_end timestamptz, p_key text,
      p_trigger text, p_workflow_id text, p_at timestamptz, p_lock_timeout_ms text, p_idle_timeout_ms text
    ) returns integer language plpgsql volatile as $fn$
    declare
      claimed integer;
      span record;
    begin
      if p_lock_timeout_ms is not null then
        -- A statement cannot outlast its attempt either: a retry would wait behind its locks.
        perform set_config('lock_timeout', p_lock_timeout_ms, true),
                set_config('statement_timeout', p_lock_timeout_ms, true),
                set_config('idle_in_transaction_session_timeout', p_idle_timeout_ms, true);
      end if;
      if p_generation = 0 then
        perform pg_advisory_xact_lock_shared(1414, hashtext(p_job));
        select s.span_start, s.span_end into span from job_done_spans s
         where s.job = p_job and s.span_start <= p_start order by s.span_start desc limit 1;
        if found and p_start < span.span_end then
          if p_end <= span.span_end then
            return null;
          end if;
          raise exception 'window %/% [%, %) starts in the done span [%, %) of job % but ends past it (was the job''s grid changed?): refused, not run; fix the job''s grid or remove the span by hand',
            p_job, to_char(p_start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), p_start, p_end,
            span.span_start, span.span_end, p_job
            using errcode = 'P0001', hint = 'tidemark: window crosses a done span';
        end if;
      end if;
      insert into job_windows (job, window_start, generation, window_end, window_key, status, attempts,
                               trigger, workflow_id, started_at)
      values (p_job, p_start, p_generation, p_end, p_key, 'done', 1, p_trigger, p_workflow_id, p_at)
      on conflict (job, window_start, generation) do update
         set status = 'done', attempts = job_windows.attempts + 1, trigger = excluded.trigger,
             workflow_id = excluded.workflow_id, started_at = excluded.started_at, reason = null
       where job_windows.status <> 'done'
      returning attempts into claimed;
      return claimed;
    end
    $fn$`.execute(db);
}
