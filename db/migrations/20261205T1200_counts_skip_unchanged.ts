// An update of job_windows that leaves every row's key and status as they were changes no count:
// the finish's update (the window's record counts and duration) and a claim that found its row
// (INSERT ... ON CONFLICT DO UPDATE fires the update trigger) each ran the count trigger's reading of
// the windows they touched for nothing, about half the ledger's work per window in a batched
// backfill (issue 33). The trigger now returns at once for such an update. It imports no file of
// the project: the function's own text, as the server holds it, gets the guard.
import { sql, type Kysely } from 'kysely';

const ANCHOR = "    begin\n      if current_setting('tidemark.span_fold', true) = 'on' then";
const GUARDED = `    begin
      -- An update that leaves every row's key and status as they were changes no count. (Nested:
      -- the condition is planned as a whole, and only an update has old_rows.)
      if tg_op = 'UPDATE' then
        if not exists (
             select 1 from new_rows n
              where not exists (
                select 1 from old_rows o
                 where o.job = n.job and o.window_start = n.window_start
                   and o.generation = n.generation and o.status = n.status)) then
          return null;
        end if;
      end if;
      if current_setting('tidemark.span_fold', true) = 'on' then`;

export async function up(db: Kysely<unknown>): Promise<void> {
  const r = await sql<{ def: string }>`
    select pg_get_functiondef(p.oid) as def from pg_proc p
     where p.proname = 'tidemark_count_windows' and p.pronamespace = current_schema()::regnamespace`.execute(
    db,
  );
  const def = r.rows[0]?.def;
  if (!def || !def.includes(ANCHOR))
    throw new Error('tidemark_count_windows is not the function migration 20261201T2000 made: not changed');
  await sql.raw(def.replace(ANCHOR, GUARDED)).execute(db);
}
