// Indexes for housekeeping's daily scans: each kind's old rows are found by a range on the table's
// time column (job_runs and effect_attempts by finished_at, closed incidents by closed_at,
// quarantine by created_at). Without them the scan that finds nothing old walked the whole primary
// key (`order by id limit n` with a filter that matches no row), every day, on every table.
//
// A plain `create index`, not `concurrently`: kysely runs the migrations in a transaction, where
// `concurrently` is refused. Each build holds a SHARE lock on its table (inserts of run records,
// attempts, incidents and quarantine wait that long: seconds on millions of rows). An operator who
// cannot have that pause creates the same indexes concurrently by hand first (`create index
// concurrently if not exists ...` with the definitions below): the migration then does nothing.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index if not exists job_runs_finished_idx on job_runs (finished_at)`.execute(db);
  await sql`create index if not exists effect_attempts_finished_idx on effect_attempts (finished_at)`.execute(
    db,
  );
  await sql`create index if not exists incidents_closed_idx on incidents (closed_at) where closed_at is not null`.execute(
    db,
  );
  await sql`create index if not exists quarantine_created_idx on quarantine (created_at)`.execute(db);
}
