// Connecting to PostgreSQL: the kysely instance, creating the database when it is missing,
// and turning an unreachable server into an error that says how to fix it.
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import { Migrator, type Migration, type MigrationResult } from 'kysely/migration';
import pg from 'pg';
import { DEFAULT_SCHEMA, LedgerSchema, schemaOf } from './ledger-schema.js';
import { migrations } from './migrations/index.js';
import { pgClient, pgPool, redactUrl } from './pg-connection.js';
import type { Database } from './schema.js';

/** PostgreSQL error codes the code reacts to, by name. */
export const PG_ERROR = Object.freeze({
  invalidCatalogName: '3D000',
  duplicateDatabase: '42P04',
  uniqueViolation: '23505',
  serializationFailure: '40001',
  lockNotAvailable: '55P03',
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

/** Whether the database of `url` exists (connects once; creates nothing). */
export async function databaseExists(url: string): Promise<boolean> {
  let probe: pg.Client;
  try {
    probe = pgClient(url);
  } catch (err) {
    throw unreachable(url, err);
  }
  try {
    await probe.connect();
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === PG_ERROR.invalidCatalogName) return false;
    throw unreachable(url, err);
  } finally {
    await probe.end().catch(() => undefined);
  }
}

/** Connects once; creates the database when the server says it does not exist. */
export async function ensureDatabase(url: string): Promise<void> {
  if (await databaseExists(url)) return;
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
  await refuseForeignMigrations(db, schema, list);
  // The shipped migrations name their tables bare: the builder's plugin qualifies them, and inside
  // the migrations' own transaction the raw SQL (triggers, functions) resolves in the schema too.
  const inSchema = (m: Migration): Migration => ({
    up: async (trx) => {
      await sql`select set_config('search_path', ${schema}, true)`.execute(trx);
      await m.up(trx);
    },
  });
  const applied = await migrateWith(db, list, inSchema, {
    schema,
    table: 'kysely_migration',
    what: 'migration',
  });
  if (applied.length > 0) await refreshPublicCompat(db, schema);
  return applied;
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
  // One that ran and is gone from the list, though later ones are in it, was renamed or removed (a
  // renamed one would run again). Ones after the list's last are a newer catalog's: taken as done.
  const last = Object.keys(list).sort().at(-1)!;
  const ran = (await recordedMigrations(db, schema, 'catalog_migration')) ?? [];
  const gone = ran.filter((n) => !(n in list) && n < last);
  if (gone.length)
    throw new DatabaseError(
      'MIGRATION_FAILED',
      `catalog migration ${gone.join(', ')} ran on this database but is not in the catalog (renamed or removed?): a catalog's migrations are append-only; put it back as it was, and make a change a new migration. Nothing was applied.`,
    );
  return await migrateWith(db, list, (m) => m, {
    schema,
    table: 'catalog_migration',
    what: 'catalog migration',
    plain: db.withoutPlugins(),
  });
}

/**
 * The schema's kysely_migration is another application's (its own kysely migrations, in a schema
 * TIDEMARK_SCHEMA names, public included): tidemark would record its migrations among them and
 * take theirs for a newer release's. Refused, naming the way out.
 */
async function refuseForeignMigrations(
  db: Kysely<Database>,
  schema: string,
  list: Readonly<Record<string, Migration>>,
): Promise<void> {
  const first = Object.keys(list)[0];
  const ran = await recordedMigrations(db, schema, 'kysely_migration');
  if (!ran || !first) return;
  const n = ran.length;
  const ours = ran.includes(first) ? 1 : 0;
  if (n > 0 && ours === 0)
    throw new DatabaseError(
      'MIGRATION_FAILED',
      `schema ${schema} already holds a kysely_migration table that is not tidemark's (${n} migrations of another application, none of tidemark's): ` +
        `tidemark would mix its migrations with them. Set TIDEMARK_SCHEMA to a schema of tidemark's own (the default, tidemark); nothing was changed.`,
    );
}

/** The ledger's migrations, then the catalog's own: what every entry point runs before it starts. */
export async function migrateAll(
  db: Kysely<Database>,
  catalogMigrations: Readonly<Record<string, Migration>>,
): Promise<string[]> {
  return [...(await migrate(db)), ...(await migrateCatalog(db, catalogMigrations))];
}

/** The names a migration table (`schema.table`) records, or undefined when it does not exist. */
async function recordedMigrations(
  db: Kysely<Database>,
  schema: string,
  table: string,
): Promise<string[] | undefined> {
  const present = await sql<{
    t: string | null;
  }>`select to_regclass(${`${schema}.${table}`})::text as t`.execute(db);
  if (!present.rows[0]?.t) return undefined;
  const ran = await sql<{ name: string }>`select name from ${sql.id(schema, table)}`.execute(db);
  return ran.rows.map((r) => r.name);
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
  const ledgerRan = new Set(
    (await recordedMigrations(db, moveFromPublic ? 'public' : schema, 'kysely_migration')) ?? [],
  );
  const catalogRan = new Set((await recordedMigrations(db, schema, 'catalog_migration')) ?? []);
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
  const ran = (await recordedMigrations(db, schemaOf(db), table)) ?? [];
  const newer: Record<string, Migration> = {};
  for (const name of ran)
    if (!(name in list))
      newer[name] = {
        up: () => Promise.reject(new Error(`${name} is a newer release's migration: it ran already`)),
      };
  return newer;
}

/**
 * What each ledger migration made in public before the ledger had a schema of its own: only what
 * the migrations recorded in public.kysely_migration made moves (a table or function of the user's
 * with one of these names is not tidemark's, and stays). The demo's tables are not here: they stay.
 */
const MADE_IN_PUBLIC: Readonly<
  Record<string, { tables?: readonly string[]; functions?: readonly string[] }>
> = Object.freeze({
  '20261129T1000_ledger': { tables: ['job_windows', 'job_runs', 'job_watermarks', 'quarantine'] },
  '20261129T1100_effects': { tables: ['effects', 'effect_attempts', 'incidents'] },
  '20261129T1400_backups': { tables: ['backups'] },
  '20261129T1500_reruns': { tables: ['rerun_requests', 'approval_audit'] },
  '20261130T1210_fix_alerts_window_notices': { tables: ['window_notices'] },
  '20261130T1800_ledger_finish_function': {
    functions: ['tidemark_advance_watermark', 'tidemark_finish_window'],
  },
  '20261130T2230_ledger_claim_function': { functions: ['tidemark_claim_window'] },
  '20261130T2300_local_window_attempts': { tables: ['local_window_attempts'] },
  '20261201T1000_done_spans': { tables: ['job_done_spans'] },
  '20261201T1000_housekeeping_progress': { tables: ['housekeeping_progress'] },
  '20261201T2000_flat_counts': {
    tables: ['effect_counts', 'job_window_counts'],
    functions: [
      'tidemark_count_effects',
      'tidemark_count_windows',
      'tidemark_fold_effect_counts',
      'tidemark_fold_window_counts',
    ],
  },
  '20261201T2300_span_count_backlog': { tables: ['job_span_backlog'], functions: ['tidemark_span_backlog'] },
  '20261202T1600_backup_checks': { tables: ['backup_checks'] },
});

/** Marks what the move leaves in public for 0.1.0's workers: --drop-public-compat drops only that. */
const COMPAT_MARK =
  'tidemark: for workers of 0.1.0 during the upgrade; tidemark migrate --drop-public-compat drops it';

/** A lock the move waits for at most this long a try (a queued ALTER holds up every reader behind it). */
const MOVE_LOCK_WAIT = '3s';
const MOVE_TRIES = 10;

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
 * records 20261129T1000_ledger). When the ledger's schema is another and holds no ledger yet, what
 * the recorded migrations made moves into it (tables with their indexes, constraints, sequences
 * and triggers; the functions, their search_path pinned to the schema), in one transaction under
 * an advisory lock (hosts starting at once move it once): the rows stay, nothing is copied. The
 * demo's tables stay in public, the user's to keep or drop (docs/upgrading.md, "Upgrading from 0.1.0").
 *
 * Workers of the earlier release may still run: their statements name the tables bare, in public.
 * Each moved table leaves a view of its name in public (with the table's grants; a plain view:
 * they read, insert, update, upsert and lock rows through it), each function a wrapper, and the
 * roles that had rights on the tables get USAGE on the schema: they keep working until replaced;
 * one restarting finds the newer migrations in the view of kysely's table and refuses to start
 * (it cannot make a second ledger). `tidemark migrate --drop-public-compat` drops the views and
 * wrappers (marked COMPAT_MARK) once no worker of the earlier release runs.
 *
 * Each try waits at most MOVE_LOCK_WAIT for a table's lock (a worker's window transaction holds
 * one): longer, and every reader would queue behind the move. After MOVE_TRIES the error names the
 * sessions that held the locks.
 */
export async function moveLedgerFromPublic(db: Kysely<Database>): Promise<string[]> {
  const schema = schemaOf(db);
  if (schema === 'public') return [];
  const plain = db.withoutPlugins();
  for (let attempt = 1; ; attempt++) {
    if (!(await inPublicToMove(plain, schema))) return [];
    try {
      return await plain.transaction().execute((trx) => moveOnce(trx, schema));
    } catch (err) {
      if ((err as { code?: string }).code !== PG_ERROR.lockNotAvailable) throw err;
      if (attempt >= MOVE_TRIES) throw await moveBlocked(plain, attempt);
      await new Promise((r) => setTimeout(r, 1_000));
    }
  }
}

async function moveOnce(trx: Transaction<Database>, schema: string): Promise<string[]> {
  await sql`select pg_advisory_xact_lock(hashtext('tidemark: ledger schema move'))`.execute(trx);
  // Another host moved it while this one waited for the lock.
  if (!(await inPublicToMove(trx, schema))) return [];
  await sql`select set_config('lock_timeout', ${MOVE_LOCK_WAIT}, true)`.execute(trx);
  const recorded = new Set(
    (await sql<{ name: string }>`select name from public.kysely_migration`.execute(trx)).rows.map(
      (r) => r.name,
    ),
  );
  const made = Object.entries(MADE_IN_PUBLIC).filter(([name]) => recorded.has(name));
  const tables = [...made.flatMap(([, m]) => m.tables ?? []), 'kysely_migration', 'kysely_migration_lock'];
  const functions = new Set(made.flatMap(([, m]) => m.functions ?? []));
  await sql.raw(`create schema if not exists ${schema}`).execute(trx);
  const moved: string[] = [];
  const grantees = new Set<string>();
  for (const table of tables) {
    const present = await sql<{ kind: string | null }>`select c.relkind::text as kind from pg_class c
      join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' and c.relname = ${table}`.execute(
      trx,
    );
    if (present.rows[0]?.kind !== 'r') continue;
    // Its grants, for its view: a worker's role that may write the table may write through the view.
    const acl = await sql<{ grantee: string; privilege: string }>`
      select case when a.grantee = 0 then 'public' else quote_ident(r.rolname) end as grantee,
             a.privilege_type as privilege
        from pg_class c cross join lateral aclexplode(c.relacl) a
        left join pg_roles r on r.oid = a.grantee
       where c.oid = ${`public.${table}`}::regclass and a.grantee <> c.relowner`.execute(trx);
    await sql.raw(`alter table public.${table} set schema ${schema}`).execute(trx);
    await sql.raw(`create view public.${table} as select * from ${schema}.${table}`).execute(trx);
    await sql.raw(`comment on view public.${table} is ${pg.escapeLiteral(COMPAT_MARK)}`).execute(trx);
    for (const g of acl.rows) {
      await sql.raw(`grant ${g.privilege} on public.${table} to ${g.grantee}`).execute(trx);
      grantees.add(g.grantee);
    }
    moved.push(table);
  }
  // The functions the recorded migrations made, their search_path pinned to the schema (their bodies
  // name tables bare), and in public a wrapper of each one that is not a trigger's.
  const fns = await sql<{ name: string; args: string; result: string; n: number; trigger: boolean }>`
    select p.proname as name, pg_get_function_identity_arguments(p.oid) as args,
           pg_get_function_result(p.oid) as result, p.pronargs::int as n,
           p.prorettype = 'trigger'::regtype as trigger
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'public' and p.proname = any(${[...functions]}::text[])`.execute(trx);
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
      await sql
        .raw(`comment on function public.${f.name}(${f.args}) is ${pg.escapeLiteral(COMPAT_MARK)}`)
        .execute(trx);
    }
    moved.push(`${f.name}()`);
  }
  // The roles that used the tables reach them (and the functions' tables) in the schema.
  for (const g of grantees) await sql.raw(`grant usage on schema ${schema} to ${g}`).execute(trx);
  return moved;
}

/** The move could not take its locks: who holds the ledger's tables, and what to do. */
async function moveBlocked(db: Kysely<Database>, tries: number): Promise<DatabaseError> {
  const holders = await sql<{ pid: number; app: string; state: string; since: string; query: string }>`
    select distinct a.pid, coalesce(nullif(a.application_name, ''), '?') as app, a.state,
           coalesce(to_char(a.xact_start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), '?') as since,
           left(a.query, 120) as query
      from pg_locks l join pg_class c on c.oid = l.relation join pg_namespace n on n.oid = c.relnamespace
      join pg_stat_activity a on a.pid = l.pid
     where n.nspname = 'public' and l.granted and a.pid <> pg_backend_pid()
       and c.relname in (${sql.join(Object.values(MADE_IN_PUBLIC).flatMap((m) => m.tables ?? []))})`.execute(
    db,
  );
  const who = holders.rows.map((h) => `pid ${h.pid} (${h.app}, ${h.state} since ${h.since}: ${h.query})`);
  return new DatabaseError(
    'MIGRATION_FAILED',
    `the ledger's move from schema public could not take its tables' locks in ${tries} tries of ${MOVE_LOCK_WAIT}: ` +
      `${who.length ? `held by ${who.join('; ')}` : 'held by transactions that have ended since'}. ` +
      'Nothing moved. Run tidemark migrate again once those transactions end (a window of a worker of 0.1.0 ends with its attempt), or stop those workers first.',
  );
}

/**
 * The views the move left in public show the columns their tables had then: a later migration's
 * added column appears in them too (a plain view's column list is fixed when it is made; a
 * replacement may only add columns at its end, as an added column is).
 */
async function refreshPublicCompat(db: Kysely<Database>, schema: string): Promise<void> {
  const stale = await sql<{ name: string }>`select c.relname as name from pg_class c
      join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'public' and c.relkind = 'v' and obj_description(c.oid, 'pg_class') = ${COMPAT_MARK}
       and (select count(*) from pg_attribute a where a.attrelid = c.oid and a.attnum > 0)
         < (select count(*) from pg_attribute a where a.attrelid = to_regclass(${schema} || '.' || c.relname)
             and a.attnum > 0 and not a.attisdropped)
     order by 1`.execute(db.withoutPlugins());
  for (const v of stale.rows)
    await sql
      .raw(`create or replace view public.${v.name} as select * from ${schema}.${v.name}`)
      .execute(db.withoutPlugins());
}

/**
 * Drops what moveLedgerFromPublic left in public for workers of the earlier release (the views and
 * wrappers it marked): run once none of them runs. Returns what it dropped (with `dryRun`: what it
 * would drop, dropping nothing).
 */
export async function dropPublicCompat(
  db: Kysely<Database>,
  opts: { dryRun?: boolean } = {},
): Promise<string[]> {
  return await db
    .withoutPlugins()
    .transaction()
    .execute(async (trx) => {
      const views = await sql<{ name: string }>`select c.relname as name from pg_class c
          join pg_namespace n on n.oid = c.relnamespace
         where n.nspname = 'public' and c.relkind = 'v' and obj_description(c.oid, 'pg_class') = ${COMPAT_MARK}
         order by 1`.execute(trx);
      const fns = await sql<{ name: string; args: string }>`select p.proname as name,
               pg_get_function_identity_arguments(p.oid) as args
          from pg_proc p join pg_namespace n on n.oid = p.pronamespace
         where n.nspname = 'public' and obj_description(p.oid, 'pg_proc') = ${COMPAT_MARK}
         order by 1`.execute(trx);
      if (!opts.dryRun) {
        for (const v of views.rows) await sql.raw(`drop view public.${v.name}`).execute(trx);
        for (const f of fns.rows) await sql.raw(`drop function public.${f.name}(${f.args})`).execute(trx);
      }
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
