// Indexes for the run history's newest-first reads (issue 14): the overview's last run, the
// sparkline's last runs and `tidemark runs` read a job's runs of one kind by id, newest first. The
// index on (job, kind, started_at) matched the filter but not the order, so each read sorted or
// walked the job's whole history (246 ms on three years of a minutely job). With (job, kind, id)
// each is a short backward index scan. A window's incidents are found by their subject's prefix
// (the window key): a range over the subject in the C collation, where byte order is prefix order.
//
// A plain `create index`, not `concurrently`: kysely runs each migration in a transaction, where
// `concurrently` is refused. It holds a SHARE lock on job_runs while it builds, so run-record
// inserts wait that long (incidents too, for their smaller build) (seconds on millions of rows); windows' claims do not touch job_runs
// before their commit, which waits with them. Migrations run when a new version is deployed,
// before its workers start: at a quiet moment, with the previous version's workers still able to
// finish their windows once the build ends. An operator who cannot have that pause creates the
// same index concurrently by hand first (`create index concurrently if not exists ...` with the
// definition below): the migration then finds it and does nothing.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index if not exists job_runs_kind_id_idx on job_runs (job, kind, id)`.execute(db);
  await sql`create index if not exists incidents_subject_idx on incidents (job, subject collate "C")`.execute(
    db,
  );
}
