// The watermark advance, one index lookup per window it passes. The recursive query it replaces
// left the join to the planner: with no statistics on job_windows yet (a new table, or one that
// grew faster than autovacuum analyses it) the planner hashed all of the job's done windows on
// every commit, a cost growing with the job's history. A loop of point lookups has one plan.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Moves the job's watermark forward from p_from over its contiguous done windows (generation
  // 0); null when it did not move. Each lookup takes a fresh snapshot (a volatile function): a
  // window committed meanwhile is passed too, which is right, since done is final.
  await sql`
    create or replace function tidemark_advance_watermark(p_job text, p_from timestamptz)
    returns timestamptz language plpgsql volatile as $fn$
    declare
      reached timestamptz := p_from;
      next_end timestamptz;
      moved timestamptz;
    begin
      loop
        select window_end into next_end from job_windows
         where job = p_job and window_start = reached and generation = 0 and status = 'done';
        exit when not found;
        reached := next_end; -- window_end > window_start (a check): the walk ends
      end loop;
      if reached = p_from then
        return null;
      end if;
      update job_watermarks set watermark = reached, updated_at = now()
       where job = p_job and reached > watermark
      returning watermark into moved;
      return moved;
    end
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    create or replace function tidemark_advance_watermark(p_job text, p_from timestamptz)
    returns timestamptz language plpgsql volatile as $fn$
    declare
      moved timestamptz;
    begin
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
}
