// One fresh, migrated database per test file, dropped at the end.
import './no-user-temporal-config.js';
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { createDb, ensureDatabase, migrateAll, poolOf } from '../../db/database.js';
import { DEFAULT_SCHEMA, ledger } from '../../db/ledger-schema.js';
import type { Database } from '../../db/schema.js';
import { demoMigrations } from '../../jobs/demo-migrations/index.js';

/** The schema of the test databases' ledger: tidemark's default, so moving the default moves the tests. */
export const SCHEMA = DEFAULT_SCHEMA;
/** The ledger's qualified names for the tests' raw SQL: `sql\`select ... from ${tm.job_windows}\``. */
export const tm = ledger(SCHEMA);

const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDb {
  db: Kysely<Database>;
  url: string;
  drop(): Promise<void>;
}

/**
 * A fresh database: the ledger and the demo's tables (the tests' jobs write them) migrated to the
 * latest, unless `migrated: false` (the migration tests start from empty).
 */
export async function createTestDb(opts: { migrated?: boolean } = {}): Promise<TestDb> {
  const name = `tidemark_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  await ensureDatabase(url);
  // No schema on the search path: a statement that names a table bare (and would rely on the
  // connection's search_path, which a user's role may set) fails here instead of passing.
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`ALTER DATABASE ${pg.escapeIdentifier(name)} SET search_path TO ''`);
  await admin.end();
  const db = createDb(url, { max: 20 });
  if (opts.migrated !== false) await migrateAll(db, demoMigrations);
  return {
    db,
    url,
    async drop() {
      await db.destroy();
      const admin = new pg.Client({ connectionString: serverUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      await admin.end();
    },
  };
}

/**
 * Every statement sent on `db`'s pool while `fn` runs, by its first three words: what a path costs
 * in round trips. Clients are wrapped as the pool hands them out.
 */
export async function statementsSent<T>(
  db: Kysely<Database>,
  fn: () => Promise<T>,
): Promise<{ result: T; sent: string[] }> {
  const sent: string[] = [];
  const pool = poolOf(db);
  const counting = (client: pg.PoolClient) => {
    const query = client.query;
    if ((query as { counted?: boolean }).counted) return;
    const wrapped = function (this: pg.PoolClient, ...args: unknown[]) {
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string })?.text;
      sent.push(String(text).trim().split(/\s+/).slice(0, 3).join(' '));
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof client.query;
    (wrapped as { counted?: boolean }).counted = true;
    client.query = wrapped;
  };
  pool.on('acquire', counting);
  try {
    return { result: await fn(), sent };
  } finally {
    pool.off('acquire', counting);
  }
}
