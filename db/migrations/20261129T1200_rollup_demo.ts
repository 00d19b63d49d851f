// Tables of the nightly rollup demo: raw events, their daily aggregates, and the chunk
// checkpoints and partial results of a window in progress.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('raw_events')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('occurred_at', 'timestamptz', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('value', 'numeric(14, 2)', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('raw_events_occurred_idx')
    .on('raw_events')
    .columns(['occurred_at', 'id'])
    .execute();
  await db.schema
    .createTable('daily_event_stats')
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('events', 'integer', (c) => c.notNull())
    .addColumn('total', 'numeric(18, 2)', (c) => c.notNull())
    .addPrimaryKeyConstraint('daily_event_stats_pk', ['job', 'day', 'kind'])
    .execute();
  await db.schema
    .createTable('batch_checkpoints')
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('chunk', 'integer', (c) => c.notNull())
    .addColumn('rows', 'integer', (c) => c.notNull())
    .addColumn('committed_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('batch_checkpoints_pk', ['window_key', 'chunk'])
    .execute();
  await db.schema
    .createTable('batch_partials')
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('chunk', 'integer', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('events', 'integer', (c) => c.notNull())
    .addColumn('total', 'numeric(18, 2)', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('batch_partials_window_idx')
    .on('batch_partials')
    .column('window_key')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['batch_partials', 'batch_checkpoints', 'daily_event_stats', 'raw_events'])
    await db.schema.dropTable(t).execute();
}
