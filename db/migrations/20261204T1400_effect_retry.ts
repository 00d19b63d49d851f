// An effect's own retry policy, kept with it: a run that finds its window done drives the open
// effects again (a batch's follow-up, a retry after a lost worker) with the policy the handler gave
// them. Null: the job's. Additive: the previous release's writers leave it null.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('effects').addColumn('retry', 'jsonb').execute();
}
