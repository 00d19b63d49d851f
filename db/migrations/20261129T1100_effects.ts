// External effects (begin / effect / done markers with a fencing number), their attempts,
// and incidents (a failure that is alerted once and cleared once).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('effects')
    .addColumn('effect_key', 'text', (c) => c.primaryKey())
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('window_key', 'text')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('channel', 'text', (c) => c.notNull())
    .addColumn('policy', 'text', (c) => c.notNull().check(sql`policy in ('ask', 'resend', 'skip')`))
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'begun', 'done', 'unknown', 'failed', 'skipped')`),
    )
    .addColumn('fence', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('request', 'jsonb', (c) => c.notNull())
    .addColumn('provider_key', 'text', (c) => c.notNull())
    .addColumn('provider_id', 'text')
    .addColumn('lease_until', 'timestamptz')
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('begun_at', 'timestamptz')
    .addColumn('done_at', 'timestamptz')
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('decision', 'text', (c) => c.check(sql`decision in ('resend', 'skip')`))
    .addColumn('decided_by', 'text')
    .addColumn('decided_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('effects_window_idx').on('effects').column('window_key').execute();
  await db.schema
    .createIndex('effects_open_idx')
    .on('effects')
    .columns(['status', 'job'])
    .where(sql.ref('status'), 'in', ['pending', 'begun', 'unknown', 'failed'])
    .execute();

  await db.schema
    .createTable('effect_attempts')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('effect_key', 'text', (c) => c.notNull().references('effects.effect_key'))
    .addColumn('fence', 'integer', (c) => c.notNull())
    .addColumn('started_at', 'timestamptz', (c) => c.notNull())
    .addColumn('finished_at', 'timestamptz', (c) => c.notNull())
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('outcome', 'text', (c) => c.notNull())
    .addColumn('provider_id', 'text')
    .addColumn('error', 'text')
    .execute();
  await db.schema.createIndex('effect_attempts_key_idx').on('effect_attempts').column('effect_key').execute();

  await db.schema
    .createTable('incidents')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('job', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('opened_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('closed_at', 'timestamptz')
    .addColumn('occurrences', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('last_error', 'text', (c) => c.notNull())
    .addColumn('details', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .execute();
  await db.schema
    .createIndex('incidents_one_open')
    .on('incidents')
    .columns(['job', 'subject'])
    .unique()
    .where(sql.ref('closed_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['incidents', 'effect_attempts', 'effects']) await db.schema.dropTable(table).execute();
}
