// The housekeeping indexes of 20261201T2200, valid. Its advice to operators who cannot have the
// lock (build them first with `create index concurrently if not exists`) leaves, when that build is
// interrupted (a lock or statement timeout, ^C, a duplicate), an INVALID index of the name: never
// used by the planner, and skipped by every `if not exists` after it, so the daily scans walked the
// whole table again for good. An invalid one is dropped and built again here (a plain build, in
// the migration's transaction, as 20261201T2200's); valid ones are left as they are.
import { sql, type Kysely } from 'kysely';

const INDEXES: Readonly<Record<string, string>> = {
  job_runs_finished_idx: 'on job_runs (finished_at)',
  effect_attempts_finished_idx: 'on effect_attempts (finished_at)',
  incidents_closed_idx: 'on incidents (closed_at) where closed_at is not null',
  quarantine_created_idx: 'on quarantine (created_at)',
};

export async function up(db: Kysely<unknown>): Promise<void> {
  const { rows } = await sql<{ name: string }>`select c.relname as name from pg_index i
    join pg_class c on c.oid = i.indexrelid
    where not i.indisvalid and c.relnamespace = current_schema()::regnamespace
      and c.relname = any(${Object.keys(INDEXES)}::text[])`.execute(db);
  for (const { name } of rows) await sql`drop index ${sql.id(name)}`.execute(db);
  for (const [name, def] of Object.entries(INDEXES))
    await sql`create index if not exists ${sql.id(name)} ${sql.raw(def)}`.execute(db);
}
