// Marketplace pushes: master price/stock changes, what each marketplace was told (with its
// version, for the guard against older windows), and the provider's reply kept on effects.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('effects').addColumn('result', 'jsonb').execute();
  await db.schema
    .createTable('price_updates')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('sku', 'text', (c) => c.notNull())
    .addColumn('price', 'numeric(12, 2)', (c) => c.notNull())
    .addColumn('stock', 'integer', (c) => c.notNull())
    .addColumn('effective_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('price_updates_effective_idx')
    .on('price_updates')
    .columns(['effective_at', 'sku'])
    .execute();
  await db.schema
    .createTable('marketplace_items')
    .addColumn('marketplace', 'text', (c) => c.notNull())
    .addColumn('sku', 'text', (c) => c.notNull())
    .addColumn('version', 'timestamptz', (c) => c.notNull())
    .addColumn('price', 'numeric(12, 2)', (c) => c.notNull())
    .addColumn('stock', 'integer', (c) => c.notNull())
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('pending', 'applied', 'rejected')`))
    .addColumn('reason', 'text')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('marketplace_items_pk', ['marketplace', 'sku'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('marketplace_items').execute();
  await db.schema.dropTable('price_updates').execute();
  await db.schema.alterTable('effects').dropColumn('result').execute();
}
