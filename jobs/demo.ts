// Demo data for `npm start`: what the demo instances of the job kinds work on.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sql } from 'kysely';
import { ensureDatabase } from '../db/database.js';
import { pgClient } from '../db/pg-connection.js';
import type { JobSeeder } from '../schedules/job.js';
import { demo, DEMO_SCHEMA } from './demo-schema.js';

/** Two days of raw events for the nightly rollup. */
export const seedEvents: JobSeeder = async (db, { now }) => {
  const from = new Date(Math.floor(now.getTime() / 86_400_000) * 86_400_000 - 2 * 86_400_000);
  const existing = await db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('raw_events')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('occurred_at', '>=', from)
    .executeTakeFirstOrThrow();
  if (Number(existing.n) > 0) return;
  await sql`insert into ${demo.raw_events} (occurred_at, kind, value)
    select ${from}::timestamptz + n * interval '8.64 seconds', (array['view', 'click', 'buy'])[1 + n % 3], (n % 97) / 4.0
      from generate_series(0, 19999) n`.execute(db);
};

/** A log file and some temporary files for housekeeping. */
export function seedFiles(stateDir: string): JobSeeder {
  return async () => {
    await mkdir(join(stateDir, 'logs'), { recursive: true });
    await mkdir(join(stateDir, 'tmp'), { recursive: true });
    await writeFile(join(stateDir, 'logs', 'demo.log'), `${new Date().toISOString()} demo log line\n`, {
      flag: 'a',
    });
    await writeFile(join(stateDir, 'tmp', `scratch-${Date.now()}.tmp`), 'scratch');
  };
}

/** A "CRM" database with customers (the sync's source) and the ledger-side copy it fills. */
export function seedCrm(sourceUrl: string): JobSeeder {
  return async (db, { now }) => {
    await ensureDatabase(sourceUrl);
    const src = pgClient(sourceUrl);
    await src.connect();
    try {
      // Named with its schema, as the sync names it (public.customers): not the role's search_path.
      await src.query(`create table if not exists public.customers (id text primary key, name text not null, email text,
        updated_at timestamptz not null default now(), deleted_at timestamptz)`);
      await src.query(
        `insert into public.customers (id, name, email, updated_at)
        select 'cust-' || n, 'Customer ' || n, 'c' || n || '@example.test', $1::timestamptz - n * interval '7 minutes'
          from generate_series(1, 200) n on conflict (id) do nothing`,
        [now],
      );
    } finally {
      await src.end();
    }
    await sql`create schema if not exists crm_copy`.execute(db);
    await sql`create table if not exists crm_copy.customers (id text primary key, name text not null, email text, updated_at timestamptz not null)`.execute(
      db,
    );
  };
}

/** Price and stock changes of 30 products over the past hours, for the marketplace push. */
export const seedPrices: JobSeeder = async (db, { now }) => {
  await sql`insert into ${demo.price_updates} (sku, price, stock, effective_at)
    select 'sku-' || lpad((n % 30)::text, 3, '0'), round((5 + (n * 37 % 500) / 10.0)::numeric, 2), n * 7 % 120,
           ${now}::timestamptz - (n * interval '4 minutes')
      from generate_series(1, 120) n`.execute(db);
};
