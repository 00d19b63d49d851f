// Published backups: where, how big, their SHA-256, the row counts inside, and when retention removed them.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('backups')
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('object_key', 'text', (c) => c.notNull())
    .addColumn('bytes', 'bigint', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('encrypted', 'boolean', (c) => c.notNull())
    .addColumn('table_counts', 'jsonb', (c) => c.notNull())
    .addColumn('restore_checked', 'boolean', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('deleted_at', 'timestamptz')
    .addPrimaryKeyConstraint('backups_pk', ['job', 'window_key'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('backups').execute();
}
