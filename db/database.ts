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
 * failing migration's name. kysely's own table lies in the schema too. A ledger that an earlier
 * release kept in public moves into the schema first (moveLedgerFromPublic).
 */
export async function migrate(
  db: Kysely<Database>,
  list: Readonly<Record<string, Migration>> = migrations,
): Promise<string[]> {
  const schema = schemaOf(db);
  await moveLedgerFromPublic(db);
  // The shipped migrations name their tables bare: the builder's plugin qualifies them, and inside
  // the migrations' own transaction the raw SQL (triggers, functions) resolves in the schema too.
  const inSchema = (m: Migration): Migration => ({
    up: async (trx) => {
      await sql`select set_config('search_path', ${schema}, true)`.execute(trx);
      await m.up(trx);
    },
  });
  return await migrateWith(db, list, inSchema, { schema, table: 'kysely_migration', what: 'migration' });
}

/**
 * Applies a catalog's own migrations (its job author's tables) after the ledger's: in name order,
 * each once, recorded in the ledger's schema (catalog_migration), run on the database as the
 * connection finds it (no ledger schema put in front of the author's names).
 */
export async function migrateCatalog(
  db: Kysely<Database>,
  list: Readonly<Record<string, Migration>>,
): Promise<string[]> {
  if (Object.keys(list).length === 0) return [];
  const schema = schemaOf(db);
  return await migrateWith(db, list, (m) => m, {
    schema,
    table: 'catalog_migration',
    what: 'catalog migration',
    plain: db.withoutPlugins(),
  });
}

/** The ledger's migrations, then the catalog's own: what every entry point runs before it starts. */
export async function migrateAll(
  db: Kysely<Database>,
  catalogMigrations: Readonly<Record<string, Migration>>,
): Promise<string[]> {
  return [...(await migrate(db)), ...(await migrateCatalog(db, catalogMigrations))];
}

/** What migrating would do, without doing it (`tidemark migrate --dry-run`). */
export interface MigrationPlan {
  /** The ledger's schema. */
  readonly schema: string;
  /** The ledger is in public (an earlier release's) and would move into `schema` first. */
  readonly moveFromPublic: boolean;
  /** The ledger's pending migrations, in order. */
  readonly ledger: readonly string[];
  /** The catalog's pending migrations, in order. */
  readonly catalog: readonly string[];
}

export async function migrationPlan(
  db: Kysely<Database>,
  catalogMigrations: Readonly<Record<string, Migration>>,
): Promise<MigrationPlan> {
  const schema = schemaOf(db);
  const moveFromPublic = await inPublicToMove(db.withoutPlugins(), schema);
  const ran = async (where: string, table: string) => {
    const present = await sql<{
      t: string | null;
    }>`select to_regclass(${`${where}.${table}`})::text as t`.execute(db);
    if (!present.rows[0]?.t) return new Set<string>();
    const rows = await sql<{ name: string }>`select name from ${sql.id(where, table)}`.execute(db);
    return new Set(rows.rows.map((r) => r.name));
  };
  const ledgerRan = await ran(moveFromPublic ? 'public' : schema, 'kysely_migration');
  const catalogRan = await ran(schema, 'catalog_migration');
  return {
    schema,
    moveFromPublic,
    ledger: Object.keys(migrations).filter((n) => !ledgerRan.has(n)),
    catalog: Object.keys(catalogMigrations)
      .sort()
      .filter((n) => !catalogRan.has(n)),
  };
}

async function migrateWith(
  db: Kysely<Database>,
  list: Readonly<Record<string, Migration>>,
  wrap: (m: Migration) => Migration,
  o: { schema: string; table: string; what: string; plain?: Kysely<Database> },
): Promise<string[]> {
  // A newer release may have migrated the database already (its roll has begun; this is a worker of
  // the previous version restarting, or one rolled back to): its migrations only expanded the schema,
  // so they are taken as done here, not refused as "missing" (which kept the worker from starting).
  // One applied between the read and the migration lock: read again.
  for (let attempt = 1; ; attempt++) {
    const newer = await newerMigrations(db, list, o.table);
    const all = Object.fromEntries(Object.entries({ ...list, ...newer }).map(([name, m]) => [name, wrap(m)]));
    const migrator = new Migrator({
      db: o.plain ?? db,
      migrationTableSchema: o.schema,
      migrationTableName: o.table,
      migrationLockTableName: `${o.table}_lock`,
      provider: { getMigrations: async () => all },
    });
    const { error, results } = await migrator.migrateToLatest();
    if (attempt < 5 && /previously executed migration .* is missing/.test(String((error as Error)?.message)))
      continue;
    return migrationResults(error, results, o.what);
  }
}

/** The migrations the database ran that `list` does not hold (a newer release's), as stubs never run. */
async function newerMigrations(
  db: Kysely<Database>,
  list: Readonly<Record<string, Migration>>,
  table: string,
): Promise<Record<string, Migration>> {
  const t = ledger(db);
  const present = await sql<{
    t: string | null;
  }>`select to_regclass(${`${t.schema}.${table}`})::text as t`.execute(db);
  if (!present.rows[0]?.t) return {};
  const ran = await sql<{ name: string }>`select name from ${t.object(table)}`.execute(db);
  const newer: Record<string, Migration> = {};
  for (const { name } of ran.rows)
    if (!(name in list))
      newer[name] = {
        up: () => Promise.reject(new Error(`${name} is a newer release's migration: it ran already`)),
      };
  return newer;
}

/**
 * The tables release 0.1.0 made for the ledger in public (the demo's stayed there), and those added
 * in public before the ledger had a schema of its own; moved with their indexes, constraints,
 * sequences and triggers by ALTER TABLE ... SET SCHEMA.
 */
const LEDGER_TABLES_IN_PUBLIC = Object.freeze([
  'job_windows',
  'job_runs',
  'job_watermarks',
  'quarantine',
  'effects',
  'effect_attempts',
  'incidents',
  'backups',
  'backup_checks',
  'rerun_requests',
  'approval_audit',
  'window_notices',
  'local_window_attempts',
  'job_done_spans',
  'housekeeping_progress',
  'effect_counts',
  'job_window_counts',
  'job_span_backlog',
  'kysely_migration',
  'kysely_migration_lock',
]);

/** Whether the ledger is an earlier release's in public, and `schema` (another) holds none yet. */
async function inPublicToMove(db: Kysely<Database>, schema: string): Promise<boolean> {
  if (schema === 'public') return false;
  const found = await sql<{ legacy: boolean }>`select to_regclass(${`${schema}.kysely_migration`}) is null
      and to_regclass('public.kysely_migration') is not null
      and to_regclass('public.job_windows') is not null as legacy`.execute(db);
  if (!found.rows[0]!.legacy) return false;
  // Its kysely table is tidemark's (an application's own kysely migrations may share the name).
  const ran = await sql<{ n: number }>`select count(*)::int as n from public.kysely_migration
    where name = '20261129T1000_ledger'`.execute(db);
  return ran.rows[0]!.n > 0;
}

/**
 * An installation of an earlier release keeps its ledger in public (its kysely_migration there
 * records 20261129T1000_ledger). When the ledger's schema is another and holds no ledger yet, the
 * ledger's tables and functions move into it, in one transaction under an advisory lock (hosts
 * starting at once move it once): the rows stay as they are, nothing is copied. The demo's tables
 * stay in public, the user's to keep or drop (README, "Upgrading from 0.1.0").
 *
 * Workers of the earlier release may still run: their statements name the tables bare, in public.
 * Each moved table leaves a view of the same name in public (a plain view: they read, insert,
 * update, upsert and lock rows through it) and each function a wrapper, so they keep working
 * until they are replaced; one restarting finds the newer migrations in the view of kysely's table
 * and refuses to start (it cannot make a second ledger). `tidemark migrate --drop-public-compat`
 * drops the views and wrappers once no worker of the earlier release runs.
 */
export async function moveLedgerFromPublic(db: Kysely<Database>): Promise<string[]> {
  const schema = schemaOf(db);
  if (schema === 'public') return [];
  const plain = db.withoutPlugins();
  if (!(await inPublicToMove(plain, schema))) return [];
  return await plain.transaction().execute(async (trx) => {
    await sql`select pg_advisory_xact_lock(hashtext('tidemark: ledger schema move'))`.execute(trx);
    // Another host moved it while this one waited for the lock.
    if (!(await inPublicToMove(trx, schema))) return [];
    // A worker of the earlier release holds its rows for a window's transaction at most: wait for it.
    await sql`select set_config('lock_timeout', '60s', true)`.execute(trx);
    await sql.raw(`create schema if not exists ${schema}`).execute(trx);
    const moved: string[] = [];
    for (const table of LEDGER_TABLES_IN_PUBLIC) {
      const present = await sql<{ kind: string | null }>`select c.relkind::text as kind from pg_class c
        join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relname = ${table}`.execute(
        trx,
      );
      if (present.rows[0]?.kind !== 'r') continue;
      await sql.raw(`alter table public.${table} set schema ${schema}`).execute(trx);
      await sql.raw(`create view public.${table} as select * from ${schema}.${table}`).execute(trx);
      moved.push(table);
    }
    // The ledger's functions, their search_path pinned to the schema (their bodies name tables bare),
    // and in public a wrapper of each one that is not a trigger's.
    const fns = await sql<{ name: string; args: string; result: string; n: number; trigger: boolean }>`
      select p.proname as name, pg_get_function_identity_arguments(p.oid) as args,
             pg_get_function_result(p.oid) as result, p.pronargs::int as n,
             p.prorettype = 'trigger'::regtype as trigger
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'public' and starts_with(p.proname, 'tidemark_')`.execute(trx);
    for (const f of fns.rows) {
      await sql.raw(`alter function public.${f.name}(${f.args}) set schema ${schema}`).execute(trx);
      await sql
        .raw(`alter function ${schema}.${f.name}(${f.args}) set search_path = ${schema}, pg_temp`)
        .execute(trx);
      if (!f.trigger) {
        const params = Array.from({ length: f.n }, (_, i) => `$${i + 1}`).join(', ');
        await sql
          .raw(
            `create function public.${f.name}(${f.args}) returns ${f.result} language sql ` +
              `as 'select ${schema}.${f.name}(${params})'`,
          )
          .execute(trx);
      }
      moved.push(`${f.name}()`);
    }
    return moved;
  });
}

/**
 * Drops what moveLedgerFromPublic left in public for workers of the earlier release (its views of
 * the ledger's tables, its function wrappers): run once none of them runs. Returns what it dropped.
 */
export async function dropPublicCompat(db: Kysely<Database>): Promise<string[]> {
  const schema = schemaOf(db);
  if (schema === 'public') return [];
  return await db
    .withoutPlugins()
    .transaction()
    .execute(async (trx) => {
      const views = await sql<{ name: string }>`select v.relname as name from pg_class v
        join pg_namespace vn on vn.oid = v.relnamespace
       where vn.nspname = 'public' and v.relkind = 'v'
         and v.relname in (${sql.join(LEDGER_TABLES_IN_PUBLIC)})
         and exists (select 1 from pg_class t join pg_namespace tn on tn.oid = t.relnamespace
                      where tn.nspname = ${schema} and t.relname = v.relname and t.relkind = 'r')
       order by 1`.execute(trx);
      const fns = await sql<{ name: string; args: string }>`select p.proname as name,
             pg_get_function_identity_arguments(p.oid) as args
        from pg_proc p join pg_namespace n on n.oid = p.pronamespace
       where n.nspname = 'public' and starts_with(p.proname, 'tidemark_')
         and exists (select 1 from pg_proc q join pg_namespace qn on qn.oid = q.pronamespace
                      where qn.nspname = ${schema} and q.proname = p.proname)
       order by 1`.execute(trx);
      for (const v of views.rows) await sql.raw(`drop view public.${v.name}`).execute(trx);
      for (const f of fns.rows) await sql.raw(`drop function public.${f.name}(${f.args})`).execute(trx);
      return [...views.rows.map((v) => v.name), ...fns.rows.map((f) => `${f.name}()`)];
    });
}

function migrationResults(
  error: unknown,
  results: readonly MigrationResult[] | undefined,
  what = 'migration',
): string[] {
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    throw new DatabaseError(
      'MIGRATION_FAILED',
      `${what} ${failed?.migrationName ?? '(unknown)'} failed: ${(error as Error)?.message ?? 'see cause'}`,
      { cause: error },
    );
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
