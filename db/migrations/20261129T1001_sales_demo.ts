// Tables of the sales-summary demo job: the source orders and the per-day summary.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('orders')
    .addColumn('order_key', 'text', (c) => c.primaryKey())
    .addColumn('placed_at', 'timestamptz', (c) => c.notNull())
    .addColumn('amount', 'numeric(14, 2)')
    .execute();
  await db.schema.createIndex('orders_placed_at_idx').on('orders').column('placed_at').execute();
  await db.schema
    .createTable('daily_sales')
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('day', 'date', (c) => c.notNull())
    .addColumn('order_count', 'integer', (c) => c.notNull())
    .addColumn('total', 'numeric(16, 2)', (c) => c.notNull().defaultTo(sql`0`))
    .addPrimaryKeyConstraint('daily_sales_pk', ['job', 'day'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('daily_sales').execute();
  await db.schema.dropTable('orders').execute();
}
