// Four steps of release 0.1.0 created the demo's tables along with the ledger's, in the ledger's
// schema. The demo's tables are the demo catalog's own now (jobs/demo-migrations, in their own
// schema), so a database that has not run these steps yet runs them without the demo's tables:
// what they did to the ledger, word for word. A database that ran them keeps what they made (the
// shipped files, pinned in releases.ts, are what it ran).
import { sql, type Kysely } from 'kysely';
import type { Migration } from 'kysely/migration';

/** 20261129T1001_sales_demo made orders and daily_sales only. */
export const salesDemo: Migration = { up: async () => undefined };

/** 20261129T1200_rollup_demo made raw_events, daily_event_stats, batch_checkpoints, batch_partials only. */
export const rollupDemo: Migration = { up: async () => undefined };

/** 20261129T1300_marketplace: the provider's reply kept on effects (price_updates, marketplace_items are the demo's). */
export const marketplace: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
    await db.schema.alterTable('effects').addColumn('result', 'jsonb').execute();
  },
};

/** 20261129T1500_reruns: requests and their audit (sales_window_totals is the demo's). */
export const reruns: Migration = {
  async up(db: Kysely<unknown>): Promise<void> {
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
  },
};
