// Alerts recorded with a window's commit (its findings' incidents, its recovery notice), so a
// retry that finds the window already done still delivers what the committing attempt could not.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('window_notices')
    .addColumn('window_key', 'text', (c) => c.notNull())
    .addColumn('effect_key', 'text', (c) => c.notNull().references('effects.effect_key'))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('window_notices_pk', ['window_key', 'effect_key'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('window_notices').execute();
}
