// Counts kept as rows change (issue 14): the page overview's done / failed / missing windows of a job
// and the /metrics effects gauge read a few rows, not the history. Each statement that writes
// job_windows or effects adds delta rows (insert only: concurrent commits of one job never touch the
// same row, so they never wait on each other); readers sum them; `tidemark_fold_*` sums a key's rows
// into one (housekeeping, and now and then a writer), skipping rows another fold holds.
//
// job_window_counts counts each window once, by the status of its latest generation; a window whose
// generation-0 marker was folded into a span (db/compaction.ts) stays counted done: compaction and
// the expansion of a span set `tidemark.span_fold` in their transaction, and the trigger leaves their
// writes out (a fold deletes done markers that stay done; an expansion puts back one that was).
// Two transactions writing rows of the same (job, window, generation) take turns on the row, and
// the later one's trigger reads the earlier one's commit (READ COMMITTED: a fresh snapshot per
// statement). Two writing different generations of one window at once (never done by the product:
// a rerun's generation is claimed after its predecessor is done) could each count from a state
// without the other's row.
// The backfill counts the spans already there by the job's most common window length (exact for
// fixed and day / week grids; spans predate no release).
import { sql, type Kysely } from 'kysely';

/** Every this many delta rows (by id), the writer folds its key's rows. */
const FOLD_EVERY = 512;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create table job_window_counts (
      id bigserial primary key,
      job text not null,
      status text not null,
      n bigint not null
    )`.execute(db);
  await sql`create index job_window_counts_job_idx on job_window_counts (job) include (status, n)`.execute(
    db,
  );
  await sql`
    create table effect_counts (
      id bigserial primary key,
      status text not null,
      channel text not null,
      n bigint not null
    )`.execute(db);

  await sql`
    create function tidemark_fold_window_counts(p_job text) returns void language sql volatile as $fn$
      with gone as (
        delete from job_window_counts
         where id in (select id from job_window_counts where job = p_job for update skip locked)
        returning status, n)
      insert into job_window_counts (job, status, n)
      select p_job, status, sum(n) from gone group by status having sum(n) <> 0
    $fn$`.execute(db);
  await sql`
    create function tidemark_fold_effect_counts() returns void language sql volatile as $fn$
      with gone as (
        delete from effect_counts where id in (select id from effect_counts for update skip locked)
        returning status, channel, n)
      insert into effect_counts (status, channel, n)
      select status, channel, sum(n) from gone group by status, channel having sum(n) <> 0
    $fn$`.execute(db);

  // Per window touched: +1 for the status of its latest generation after the statement, -1 for
  // the one before it (the rows now, less those the statement wrote, plus those it replaced).
  // The touched windows' rows are read by key, one lookup each (\`offset 0\` keeps the planner from
  // turning it into a join that, with no statistics yet, would read the whole table per commit).
  const delta = (written: string | null, replaced: string | null) => `
        with t as (select distinct job, window_start from ${written ?? replaced}),
        cur as (select w.* from t cross join lateral (
                 select w.job, w.window_start, w.generation, w.status from job_windows w
                  where w.job = t.job and w.window_start = t.window_start offset 0) w),
        before as (select * from cur c
                    ${written ? `where not exists (select 1 from ${written} x where x.job = c.job and x.window_start = c.window_start and x.generation = c.generation)` : ''}
                    ${replaced ? `union all select job, window_start, generation, status from ${replaced}` : ''}),
        d as (select job, status, 1 as d from (select distinct on (job, window_start) job, status from cur
                                                 order by job, window_start, generation desc) a
              union all
              select job, status, -1 from (select distinct on (job, window_start) job, status from before
                                             order by job, window_start, generation desc) b)
        insert into job_window_counts (job, status, n)
        select job, status, sum(d) from d group by job, status having sum(d) <> 0
        returning id, job`;
  await sql`
    create function tidemark_count_windows() returns trigger language plpgsql volatile as $fn$
    declare
      delta record;
    begin
      if current_setting('tidemark.span_fold', true) = 'on' then
        return null;
      end if;
      if tg_op = 'INSERT' then
        for delta in ${sql.raw(delta('new_rows', null))} loop
          if delta.id % ${sql.lit(FOLD_EVERY)} = 0 then perform tidemark_fold_window_counts(delta.job); end if;
        end loop;
      elsif tg_op = 'UPDATE' then
        for delta in ${sql.raw(delta('new_rows', 'old_rows'))} loop
          if delta.id % ${sql.lit(FOLD_EVERY)} = 0 then perform tidemark_fold_window_counts(delta.job); end if;
        end loop;
      else
        for delta in ${sql.raw(delta(null, 'old_rows'))} loop
          if delta.id % ${sql.lit(FOLD_EVERY)} = 0 then perform tidemark_fold_window_counts(delta.job); end if;
        end loop;
      end if;
      return null;
    end
    $fn$`.execute(db);
  // Per (status, channel): rows the statement wrote, less those it replaced.
  const effectDelta = (written: string | null, replaced: string | null) => `
        insert into effect_counts (status, channel, n)
        select status, channel, sum(d) from (
          ${[written && `select status, channel, 1 as d from ${written}`, replaced && `select status, channel, -1 as d from ${replaced}`].filter(Boolean).join(' union all ')}) x
         group by status, channel having sum(d) <> 0
        returning id`;
  await sql`
    create function tidemark_count_effects() returns trigger language plpgsql volatile as $fn$
    declare
      delta record;
    begin
      if tg_op = 'INSERT' then
        for delta in ${sql.raw(effectDelta('new_rows', null))} loop
          if delta.id % ${sql.lit(FOLD_EVERY)} = 0 then perform tidemark_fold_effect_counts(); end if;
        end loop;
      elsif tg_op = 'UPDATE' then
        for delta in ${sql.raw(effectDelta('new_rows', 'old_rows'))} loop
          if delta.id % ${sql.lit(FOLD_EVERY)} = 0 then perform tidemark_fold_effect_counts(); end if;
        end loop;
      else
        for delta in ${sql.raw(effectDelta(null, 'old_rows'))} loop
          if delta.id % ${sql.lit(FOLD_EVERY)} = 0 then perform tidemark_fold_effect_counts(); end if;
        end loop;
      end if;
      return null;
    end
    $fn$`.execute(db);
  // A trigger with transition tables takes one event. Created before the backfill: its lock waits
  // for the writers in flight, whose rows the backfill then reads; later writes count themselves.
  for (const op of ['insert', 'update', 'delete'] as const) {
    const rows =
      op === 'insert'
        ? sql`new table as new_rows`
        : op === 'delete'
          ? sql`old table as old_rows`
          : sql`old table as old_rows new table as new_rows`;
    await sql`create trigger ${sql.raw(`job_windows_count_${op}`)} after ${sql.raw(op)} on job_windows
      referencing ${rows} for each statement execute function tidemark_count_windows()`.execute(db);
    await sql`create trigger ${sql.raw(`effects_count_${op}`)} after ${sql.raw(op)} on effects
      referencing ${rows} for each statement execute function tidemark_count_effects()`.execute(db);
  }
  await sql`
    insert into job_window_counts (job, status, n)
    select job, status, count(*) from (
      select distinct on (job, window_start) job, status from job_windows order by job, window_start, generation desc) w
     group by job, status`.execute(db);
  await sql`
    insert into job_window_counts (job, status, n)
    select s.job, 'done', sum(round(extract(epoch from s.span_end - s.span_start) / g.len))::bigint
      from job_done_spans s
      join (select job, extract(epoch from mode() within group (order by window_end - window_start)) as len
              from job_windows group by job) g on g.job = s.job
     group by s.job`.execute(db);
  await sql`insert into effect_counts (status, channel, n)
    select status, channel, count(*) from effects group by status, channel`.execute(db);
}
