// Reruns: requests and their decisions (an audit of every decision, accepted or refused), and
// the sales summary's per-window contributions, so a rerun replaces its earlier generation.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rerun_requests')
    .addColumn('workflow_id', 'text', (c) => c.primaryKey())
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('generation', 'integer', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('requested_by', 'text', (c) => c.notNull())
    .addColumn('requested_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'approved', 'rejected', 'timed-out', 'done', 'failed')`),
    )
    .addColumn('decided_by', 'text')
    .addColumn('decided_at', 'timestamptz')
    .addColumn('note', 'text')
    .execute();
  await db.schema
    .createTable('approval_audit')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('request', 'text', (c) => c.notNull())
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('decision', 'text', (c) => c.notNull())
    .addColumn('accepted', 'boolean', (c) => c.notNull())
    .addColumn('reason', 'text')
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createTable('sales_window_totals')
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_start', 'timestamptz', (c) => c.notNull())
    .addColumn('generation', 'integer', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('order_count', 'integer', (c) => c.notNull())
    .addColumn('total', 'numeric(16, 2)', (c) => c.notNull())
    .addPrimaryKeyConstraint('sales_window_totals_pk', ['job', 'window_start', 'generation', 'day'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const t of ['sales_window_totals', 'approval_audit', 'rerun_requests'])
    await db.schema.dropTable(t).execute();
}
