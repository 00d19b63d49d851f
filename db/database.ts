// Connecting to PostgreSQL: the kysely instance, creating the database when it is missing,
// and turning an unreachable server into an error that says how to fix it.
import { Kysely, PostgresDialect, sql } from 'kysely';
import { Migrator, type Migration, type MigrationResult } from 'kysely/migration';
import pg from 'pg';
import { DEFAULT_SCHEMA, LedgerSchema, ledger, schemaOf } from './ledger-schema.js';
import { migrations } from './migrations/index.js';
import { pgClient, pgPool, redactUrl } from './pg-connection.js';
import type { Database } from './schema.js';

/** PostgreSQL error codes the code reacts to, by name. */
export const PG_ERROR = Object.freeze({
  invalidCatalogName: '3D000',
  duplicateDatabase: '42P04',
  uniqueViolation: '23505',
  serializationFailure: '40001',
  deadlockDetected: '40P01',
  invalidAuthorization: '28000',
  invalidPassword: '28P01',
});

export class DatabaseError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseError';
    this.code = code;
  }
}

const DATE_OID = 1082;
const INT8_OID = 20;
const customTypes = {
  // Dates stay 'YYYY-MM-DD' text (no local-midnight Date); counts from count(*) become numbers.
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === DATE_OID) return (value: string) => value;
    if (oid === INT8_OID) return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format);
  },
};

export { redactUrl };

/** The pool behind each instance createDb made, for work that needs a connection of its own (COPY). */
const pools = new WeakMap<Kysely<Database>, pg.Pool>();

export function poolOf(db: Kysely<Database>): pg.Pool {
  const pool = pools.get(db);
  if (!pool) throw new Error('this database handle was not made by createDb (db/database.ts)');
  return pool;
}

/**
 * A kysely instance on a pool whose connections honour the URL's and PG* TLS settings
 * (db/pg-connection.ts), its builder's queries naming the ledger's schema (db/ledger-schema.ts).
 */
export function createDb(url: string, opts: { max?: number; schema?: string } = {}): Kysely<Database> {
  const pool = pgPool(url, { max: opts.max ?? 10, types: customTypes });
  // An idle client that loses its connection must not crash the process.
  pool.on('error', () => undefined);
  // Nor one that a transaction holds between statements (a server restart, a terminated
  // backend): the pool removes its own listener while a client is checked out, and an 'error'
  // event with none kills the process. The transaction still fails on its next statement.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    plugins: [new LedgerSchema(opts.schema ?? DEFAULT_SCHEMA)],
  });
  pools.set(db, pool);
  return db;
}

function unreachable(url: string, err: unknown): DatabaseError {
  // A TLS setting that explains the failure: the message says which one and how to fix it.
  if ((err as Error).name === 'PgTlsError' || (err as Error).name === 'PgSettingError')
    return new DatabaseError('DB_TLS', (err as Error).message, { cause: err });
  // The server answered but refused the user (no such role, wrong password, no pg_hba.conf entry).
  const code = (err as { code?: string }).code;
  if (code === PG_ERROR.invalidAuthorization || code === PG_ERROR.invalidPassword)
    return new DatabaseError(
      'DB_LOGIN',
      `PostgreSQL at ${redactUrl(url)} refused the login (${(err as Error).message}): check the user and ` +
        "password in DATABASE_URL (and the server's pg_hba.conf).",
      { cause: err },
    );
  return new DatabaseError(
    'DB_UNREACHABLE',
    `PostgreSQL at ${redactUrl(url)} cannot be reached (${(err as Error).message}). ` +
      'Start it (on Debian: pg_ctlcluster 15 main start) or set DATABASE_URL to a running server.',
    { cause: err },
  );
}

/** Connects once; creates the database when the server says it does not exist. */
export async function ensureDatabase(url: string): Promise<void> {
  let probe: pg.Client;
  try {
    probe = pgClient(url);
  } catch (err) {
    throw unreachable(url, err);
  }
  try {
    await probe.connect();
    await probe.end();
    return;
  } catch (err) {
    await probe.end().catch(() => undefined);
    if ((err as { code?: string }).code !== PG_ERROR.invalidCatalogName) throw unreachable(url, err);
  }
  const target = new URL(url);
  let name: string;
  try {
    name = decodeURIComponent(target.pathname.slice(1));
  } catch {
    throw new DatabaseError(
      'DB_URL',
      `the database name in DATABASE_URL (${redactUrl(url)}) is not valid percent-encoding: write a % in it as %25`,
    );
  }
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = pgClient(admin.toString());
  try {
    await client.connect();
    await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    // Another host created it first: 42P04 when its creation had committed, 23505 on pg_database's
    // unique index when both created it at once.
    const code = (err as { code?: string }).code;
    if (code === PG_ERROR.duplicateDatabase || code === PG_ERROR.uniqueViolation) return;
    // The server answered with an error: it refused the creation (no CREATEDB right, ...).
    if (
      err instanceof pg.DatabaseError &&
      code !== PG_ERROR.invalidAuthorization &&
      code !== PG_ERROR.invalidPassword
    )
      throw new DatabaseError(
        'DB_CREATE',
        `the database ${JSON.stringify(name)} at ${redactUrl(url)} does not exist, and tidemark could not create it ` +
          `(${(err as Error).message}): create it (createdb ${name}), or give the user the CREATEDB right.`,
        { cause: err },
      );
    throw unreachable(url, err);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Applies every pending migration in the ledger's schema (created when missing); throws with the
 * failing migration's name. kysely's own table lies in the schema too.
 */
export async function migrate(
  db: Kysely<Database>,
  list: Readonly<Record<string, Migration>> = migrations,
): Promise<string[]> {
  const schema = schemaOf(db);
  // The shipped migrations name their tables bare: the builder's plugin qualifies them, and inside
  // the migrations' own transaction the raw SQL (triggers, functions) resolves in the schema too.
  const inSchema = (m: Migration): Migration => ({
    up: async (trx) => {
      await sql`select set_config('search_path', ${schema}, true)`.execute(trx);
      await m.up(trx);
    },
  });
  // A newer release may have migrated the database already (its roll has begun; this is a worker of
  // the previous version restarting, or one rolled back to): its migrations only expanded the schema,
  // so they are taken as done here, not refused as "missing" (which kept the worker from starting).
  // One applied between the read and the migration lock: read again.
  for (let attempt = 1; ; attempt++) {
    const newer = await newerMigrations(db, list);
    const all = Object.fromEntries(
      Object.entries({ ...list, ...newer }).map(([name, m]) => [name, inSchema(m)]),
    );
    const migrator = new Migrator({
      db,
      migrationTableSchema: schema,
      provider: { getMigrations: async () => all },
    });
    const { error, results } = await migrator.migrateToLatest();
    if (attempt < 5 && /previously executed migration .* is missing/.test(String((error as Error)?.message)))
      continue;
    return migrationResults(error, results);
  }
}

/** The migrations the database ran that `list` does not hold (a newer release's), as stubs never run. */
async function newerMigrations(
  db: Kysely<Database>,
  list: Readonly<Record<string, Migration>>,
): Promise<Record<string, Migration>> {
  const t = ledger(db);
  const present = await sql<{
    t: string | null;
  }>`select to_regclass(${`${t.schema}.kysely_migration`})::text as t`.execute(db);
  if (!present.rows[0]?.t) return {};
  const ran = await sql<{ name: string }>`select name from ${t.object('kysely_migration')}`.execute(db);
  const newer: Record<string, Migration> = {};
  for (const { name } of ran.rows)
    if (!(name in list))
      newer[name] = {
        up: () => Promise.reject(new Error(`${name} is a newer release's migration: it ran already`)),
      };
  return newer;
}

function migrationResults(error: unknown, results: readonly MigrationResult[] | undefined): string[] {
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new DatabaseError(
      'MIGRATION_FAILED',
      `migration ${failed?.migrationName ?? '(unknown)'} failed: ${(error as Error)?.message ?? 'see cause'}`,
      { cause: error },
    );
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
