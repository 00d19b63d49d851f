// The schema of the demo's own tables (orders, daily_sales, ...), apart from tidemark's ledger
// (db/ledger-schema.ts): the demo jobs name it in every statement, raw SQL through `demo` and the
// builder through `withSchema(DEMO_SCHEMA)`, so they never depend on where the ledger lies nor on
// the connection's search_path.
import type { RawBuilder } from 'kysely';
import { ledger } from '../db/ledger-schema.js';
import type { Database } from '../db/schema.js';

/** Where the demo's tables lie. */
export const DEMO_SCHEMA = 'tidemark_demo';

/** The demo's tables (created by the demo catalog's own migrations, jobs/demo-migrations, in DEMO_SCHEMA). */
export const DEMO_TABLES = Object.freeze([
  'orders',
  'daily_sales',
  'sales_window_totals',
  'raw_events',
  'daily_event_stats',
  'batch_checkpoints',
  'batch_partials',
  'price_updates',
  'marketplace_items',
] as const satisfies readonly (keyof Database)[]);

export type DemoTable = (typeof DEMO_TABLES)[number];

/** Schema-qualified names of the demo's tables for raw SQL: `sql\`select ... from ${demo.orders}\``. */
export const demo: { readonly schema: string } & { readonly [T in DemoTable]: RawBuilder<unknown> } =
  ledger(DEMO_SCHEMA);

/** A demo table's qualified name as text, where a name is taken (copyRows, a job's declared writes). */
export function demoTable(table: DemoTable): string {
  return `${DEMO_SCHEMA}.${table}`;
}
