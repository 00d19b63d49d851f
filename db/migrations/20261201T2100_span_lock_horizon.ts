// The claim takes the job's span lock only for a window that could be in a span or being folded: one
// that started more than 12 hours ago on the database's clock. Compaction folds only windows that
// ended at least a day ago (db/compaction.ts, COMPACTION_MIN_AGE), so a busy job's current windows
// (long ones overlapping, a parallel backfill) never keep compaction from the lock, nor wait for it;
// the gap between the two covers a window transaction open for hours. The span check itself stays for
// every window. Same signature: workers of the previous version call the new body.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
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
        if p_start < clock_timestamp() - interval '12 hours' then
          perform pg_advisory_xact_lock_shared(1414, hashtext(p_job));
        end if;
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
