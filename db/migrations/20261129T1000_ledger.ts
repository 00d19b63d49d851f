// The ledger: watermarks, windows (the idempotency markers), the run history and quarantine.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('job_watermarks')
    .addColumn('job', 'text', (c) => c.primaryKey())
    .addColumn('watermark', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('job_windows')
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('generation', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('window_end', 'timestamptz', (c) => c.notNull())
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('done', 'failed')`))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('workflow_id', 'text')
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('finished_at', 'timestamptz')
    .addColumn('duration_ms', 'integer')
    .addColumn('reason', 'text')
    .addColumn('records_in', 'integer')
    .addColumn('records_applied', 'integer')
    .addColumn('records_quarantined', 'integer')
    .addPrimaryKeyConstraint('job_windows_pk', ['job', 'window_start', 'generation'])
    .addCheckConstraint('job_windows_half_open', sql`window_end > window_start`)
    .execute();
  await db.schema
    .createIndex('job_windows_status_idx')
    .on('job_windows')
    .columns(['job', 'status', 'window_start'])
    .execute();

  await db.schema
    .createTable('job_runs')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull().check(sql`kind in ('tick', 'window', 'backfill', 'rerun')`))
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz')
    .addColumn('generation', 'integer')
    .addColumn('workflow_id', 'text')
    .addColumn('attempt', 'integer')
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('finished_at', 'timestamptz', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('details', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
  await db.schema
    .createIndex('job_runs_job_idx')
    .on('job_runs')
    .columns(['job', 'kind', 'started_at'])
    .execute();

  await db.schema
    .createTable('quarantine')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('generation', 'integer', (c) => c.notNull())
    .addColumn('record_key', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('quarantine_record_once', ['job', 'window_start', 'generation', 'record_key'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['quarantine', 'job_runs', 'job_windows', 'job_watermarks'])
    await db.schema.dropTable(table).execute();
}
