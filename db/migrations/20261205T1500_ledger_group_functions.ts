// A group of a batch's windows in one transaction (issue 33): the claims of all its windows in one
// statement before their handlers, and their finishes in one statement after, carrying the COMMIT.
// Each window gets what tidemark_claim_window and tidemark_finish_window give one: the same span
// check and lock, the same upsert (a window done already is not claimed), the same counts, run
// record and watermark walk; the watermark row is locked once for the group. Additive: the
// functions for one window stay, and workers of the previous release keep calling them. It imports
// no file of the project: the schema is the one migrate() runs it in.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  const r = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db);
  const schema = r.rows[0]?.schema;
  if (!schema)
    throw new Error('run by migrate() (db/database.ts), with the ledger schema as its search_path');
  // The windows come as parallel arrays (one element per window, in the batch's order); the result
  // names the windows claimed, with their attempts (a window done already is left out).
  await sql`
    create function tidemark_claim_windows(
      p_job text, p_starts timestamptz[], p_generations integer[], p_ends timestamptz[], p_keys text[],
      p_trigger text, p_workflow_id text, p_at timestamptz, p_lock_timeout_ms text, p_idle_timeout_ms text
    ) returns table (claimed_start timestamptz, claimed_generation integer, claimed_attempts integer)
    language plpgsql volatile
    set search_path = ${sql.id(schema)}, pg_temp
    as $fn$
    declare
      crossing record;
    begin
      if p_lock_timeout_ms is not null then
        -- A statement cannot outlast its attempt either: a retry would wait behind its locks.
        perform set_config('lock_timeout', p_lock_timeout_ms, true),
                set_config('statement_timeout', p_lock_timeout_ms, true),
                set_config('idle_in_transaction_session_timeout', p_idle_timeout_ms, true);
      end if;
      -- As tidemark_claim_window: a window old enough to be folded into a span waits out a
      -- compaction folding it (migration 20261201T2100).
      if exists (select 1 from unnest(p_starts, p_generations) u(s, g)
                  where u.g = 0 and u.s < clock_timestamp() - interval '12 hours') then
        perform pg_advisory_xact_lock_shared(1414, hashtext(p_job));
      end if;
      select u.s, u.e, ds.span_start, ds.span_end into crossing
        from unnest(p_starts, p_generations, p_ends) u(s, g, e)
        cross join lateral (
          select d.span_start, d.span_end from job_done_spans d
           where d.job = p_job and d.span_start <= u.s order by d.span_start desc limit 1) ds
       where u.g = 0 and u.s < ds.span_end and u.e > ds.span_end
       limit 1;
      if found then
        raise exception 'window %/% [%, %) starts in the done span [%, %) of job % but ends past it (was the job''s grid changed?): refused, not run; fix the job''s grid or remove the span by hand',
          p_job, to_char(crossing.s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), crossing.s, crossing.e,
          crossing.span_start, crossing.span_end, p_job
          using errcode = 'P0001', hint = 'tidemark: window crosses a done span';
      end if;
      return query
      with claimed as (
        insert into job_windows as jw (job, window_start, generation, window_end, window_key, status,
                                       attempts, trigger, workflow_id, started_at)
        select p_job, u.s, u.g, u.e, u.k, 'done', 1, p_trigger, p_workflow_id, p_at
          from unnest(p_starts, p_generations, p_ends, p_keys) with ordinality u(s, g, e, k, i)
         where not (u.g = 0 and exists (
                 select 1 from (select d.span_end from job_done_spans d
                                 where d.job = p_job and d.span_start <= u.s
                                 order by d.span_start desc limit 1) ds
                  where u.s < ds.span_end))
         order by u.i
        on conflict (job, window_start, generation) do update
           set status = 'done', attempts = jw.attempts + 1, trigger = excluded.trigger,
               workflow_id = excluded.workflow_id, started_at = excluded.started_at, reason = null
         where jw.status <> 'done'
        returning jw.window_start, jw.generation, jw.attempts)
      select c.window_start, c.generation, c.attempts from claimed c;
    end
    $fn$`.execute(db);
  // Ends the claimed windows of a group: the job's watermark row locked once (as
  // tidemark_finish_window locks it for one), each window's counts stored and its run recorded, and
  // the watermark moved over the contiguous done windows from it.
  await sql`
    create function tidemark_finish_windows(
      p_job text, p_starts timestamptz[], p_generations integer[],
      p_inputs integer[], p_applied integer[], p_quarantined integer[],
      p_started_at timestamptz[], p_finished_at timestamptz[], p_workflow_id text, p_attempt integer,
      p_details jsonb[]
    ) returns timestamptz
    language plpgsql volatile
    set search_path = ${sql.id(schema)}, pg_temp
    as $fn$
    declare
      locked timestamptz;
      moved timestamptz;
    begin
      select watermark into locked from job_watermarks where job = p_job for update;
      update job_windows jw
         set records_in = u.i, records_applied = u.a, records_quarantined = u.q,
             finished_at = u.f, duration_ms = (extract(epoch from u.f - u.st) * 1000)::integer
        from unnest(p_starts, p_generations, p_inputs, p_applied, p_quarantined, p_started_at, p_finished_at)
               u(s, g, i, a, q, st, f)
       where jw.job = p_job and jw.window_start = u.s and jw.generation = u.g;
      insert into job_runs (kind, job, window_start, generation, workflow_id, attempt, started_at,
                            finished_at, duration_ms, outcome, details)
      select 'window', p_job, u.s, u.g, p_workflow_id, p_attempt, u.st, u.f,
             (extract(epoch from u.f - u.st) * 1000)::integer, 'processed', u.d
        from unnest(p_starts, p_generations, p_started_at, p_finished_at, p_details) with ordinality
               u(s, g, st, f, d, n)
       order by u.n;
      moved := tidemark_advance_watermark(p_job, locked);
      return coalesce(moved, locked);
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function tidemark_finish_windows(text, timestamptz[], integer[], integer[], integer[],
    integer[], timestamptz[], timestamptz[], text, integer, jsonb[])`.execute(db);
  await sql`drop function tidemark_claim_windows(text, timestamptz[], integer[], timestamptz[], text[],
    text, text, timestamptz, text, text)`.execute(db);
}
