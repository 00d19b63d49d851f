// The database a restore (or a drill) writes into: its name read from --into, refused when it is
// the job's source or tidemark's ledger, created when missing and dropped again, counted for
// relations, and held by one restore at a time.
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { PG_ERROR } from '../../db/database.js';
import { pgClient, redactUrl } from '../../db/pg-connection.js';
import type { Database } from '../../db/schema.js';

/** A restore the command line must say more for (--clean, --overwrite-source), or cannot do. */
export class RestoreRefusedError extends Error {
  readonly code = 'RESTORE_REFUSED';
}

const adminUrl = (url: string) => {
  const u = new URL(url);
  u.pathname = '/postgres';
  return u.toString();
};

export function databaseName(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RestoreRefusedError(
      `--into: "${redactUrl(url)}" is not a URL; write postgres://user@host:5432/dbname`,
    );
  }
  if (!/^postgres(ql)?:$/.test(u.protocol))
    throw new RestoreRefusedError(`--into: ${redactUrl(url)} is not a postgres:// URL`);
  const name = decodeURIComponent(u.pathname.slice(1));
  if (!name || name.includes('/'))
    throw new RestoreRefusedError(
      `--into: ${redactUrl(url)} names no database; end it with /<database name>`,
    );
  return name;
}

const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]', '::1', '']);
function place(url: string): string {
  const u = new URL(url);
  const host = LOOPBACK.has(u.hostname) ? 'loopback' : u.hostname.toLowerCase();
  return `${host}:${u.port || '5432'}/${decodeURIComponent(u.pathname.slice(1))}`;
}

/** The server's identity and the database's name, when it answers (the source may be down: that is why one restores). */
// What any user may read: two servers started in the same microsecond on the same port do not happen.
const SERVER_AND_DATABASE = `select pg_postmaster_start_time()::text || ' port ' || current_setting('port') || '/' || current_database() as id`;

async function identity(url: string): Promise<string | undefined> {
  const c = pgClient(url, { connectionTimeoutMillis: 5_000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    const r = await c.query<{ id: string }>(SERVER_AND_DATABASE);
    return r.rows[0]?.id;
  } catch {
    return undefined;
  } finally {
    await c.end().catch(() => undefined);
  }
}

/** Whether two URLs name one database: by host, port and name, or (both answering) by server and name. */
export async function sameDatabase(a: string, b: string): Promise<boolean> {
  if (place(a) === place(b)) return true;
  const [x, y] = await Promise.all([identity(a), identity(b)]);
  return x !== undefined && x === y;
}

/** The drill drops its scratch database: never the job's source. */
export async function refuseSourceAsScratch(
  job: string,
  database: string,
  scratch: string,
  ledger: Kysely<Database>,
): Promise<void> {
  const mine =
    'and a drill drops its scratch database: name a database of its own (e.g. <name>_restore_check)';
  if (await sameDatabase(database, scratch))
    throw new RestoreRefusedError(
      `restoreCheck: the scratch database ${redactUrl(scratch)} is the database job ${job} backs up, ${mine}`,
    );
  const ours = (await sql<{ id: string }>`${sql.raw(SERVER_AND_DATABASE)}`.execute(ledger)).rows[0]?.id;
  if (ours !== undefined && ours === (await identity(scratch)))
    throw new RestoreRefusedError(
      `restoreCheck: the scratch database ${redactUrl(scratch)} is tidemark's own ledger (DATABASE_URL), ${mine}`,
    );
}

/** Creates the database if it is missing; says whether it did. */
export async function createIfMissing(url: string, name: string): Promise<boolean> {
  const probe = pgClient(url);
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return false;
  } catch (err) {
    if ((err as { code?: string }).code !== PG_ERROR.invalidCatalogName) throw err;
  } finally {
    await probe.end().catch(() => undefined);
  }
  const admin = pgClient(adminUrl(url));
  await admin.connect();
  try {
    await admin.query(`create database ${pg.escapeIdentifier(name)}`);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === PG_ERROR.duplicateDatabase) return false;
    throw err;
  } finally {
    await admin.end().catch(() => undefined);
  }
}

export async function dropDatabase(url: string, name: string): Promise<void> {
  const admin = pgClient(adminUrl(url));
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/** Relations outside the system schemas: what a restore without --clean would collide with. */
export async function relationsIn(url: string): Promise<number> {
  const c = pgClient(url);
  await c.connect();
  try {
    const r = await c.query<{ n: string }>(
      `select count(*) as n from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where c.relkind in ('r', 'p', 'v', 'm', 'S', 'f')
         and n.nspname not in ('pg_catalog', 'information_schema') and n.nspname not like 'pg\\_toast%'
         and n.nspname not like 'pg\\_temp\\_%'`,
    );
    return Number(r.rows[0]!.n);
  } finally {
    await c.end().catch(() => undefined);
  }
}

/**
 * Runs `fn` holding a lock on the target server for the database `name`, or refuses: two restores
 * (or a restore and a drill) into one database would each find it "created by someone else, empty",
 * and the one that fails drops the database the other restored into. The lock is the admin
 * session's: it goes with the session, also when this process is killed.
 */
export async function exclusively<T>(
  url: string,
  name: string,
  fn: () => Promise<T>,
  opts: { wait?: boolean } = {},
): Promise<T> {
  const c = pgClient(adminUrl(url));
  c.on('error', () => undefined);
  await c.connect();
  try {
    const lock = `tidemark restore into ${name}`;
    // A window's drill waits for the one before it (its window would fail otherwise); a command refuses.
    if (opts.wait) await c.query('select pg_advisory_lock(hashtext($1))', [lock]);
    const r = opts.wait
      ? { rows: [{ ok: true }] }
      : await c.query<{ ok: boolean }>('select pg_try_advisory_lock(hashtext($1)) as ok', [lock]);
    if (!r.rows[0]!.ok)
      throw new RestoreRefusedError(
        `another restore or drill into ${redactUrl(url)} is running: wait for it to end, or restore into another database name`,
      );
    return await fn();
  } finally {
    await c.end().catch(() => undefined);
  }
}
