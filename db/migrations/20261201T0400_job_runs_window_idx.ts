// A window's run records by its start (the page's window detail): without it, reading one
// window's runs scans every run of its job.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create index job_runs_window_idx on job_runs (job, window_start) where window_start is not null`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index job_runs_window_idx`.execute(db);
}
