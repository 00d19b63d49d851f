// Starts of a window's local attempts, per window run. A local attempt lost with its worker leaves
// nothing in Temporal's history (the SDK runs it again at attempt 1 on the next worker): counted
// here, outside the window's transaction, so the job's maximumAttempts bounds lost attempts too.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('local_window_attempts')
    .addColumn('window_key', 'text', (c) => c.primaryKey())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('starts', 'integer', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('local_window_attempts').execute();
}
