// Backups people can restore: each backup names the key it was encrypted with (so rotated keys
// still restore old backups) and when its snapshot was taken (what `--at TIME` picks by), and
// every verification and restore drill is recorded (what `backups list` and `tidemark jobs` show).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('backups')
    .addColumn('key_id', 'text')
    .addColumn('dumped_at', 'timestamptz')
    .execute();
  await db.schema
    .createTable('backup_checks')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('verify', 'drill')`))
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('ok', 'boolean', (c) => c.notNull())
    .addColumn('detail', 'text', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index backup_checks_job_kind_at_idx on backup_checks (job, kind, at desc)`.execute(db);
}
