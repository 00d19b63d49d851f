// Getting a backup back: list what exists, verify one before trusting it, restore it into a
// database or write it out as a plain pg_dump file, and the restore drill. Every path streams the
// stored object once through the same checks: its size and SHA-256 against the record, the GCM
// tag (an encrypted backup, with the key its header names), and pg_restore. A restore runs in one
// transaction and its pg_restore is killed before its input ends when a check fails, so a
// database is never left half-restored: it holds the whole backup or is as it was (and a database
// the restore created is dropped again).
import { createWriteStream } from 'node:fs';
import { link, open, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PassThrough, type Readable, type Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { PG_ERROR } from '../../db/database.js';
import { pgClient, redactUrl } from '../../db/pg-connection.js';
import type { Database } from '../../db/schema.js';
import { countRows } from './counts.js';
import { describeKeySource } from './keys.js';
import { feedRestore } from './pg.js';
import { DRILL_FAILED, type BackupJob } from './registry.js';
import { BackupCheckError, decryptor, expectDigest, type KeyLookup } from './streams.js';

export { backupJobOf, type BackupJob } from './registry.js';

export interface BackupRecord {
  job: string;
  windowKey: string;
  windowStart: string;
  /** When the dump's snapshot was taken (for older backups: when the record was written). */
  dumpedAt: string;
  /** Where it is: "directory /x/y.dump" or "s3://bucket/key at host". */
  location: string;
  destination: string;
  objectKey: string;
  bytes: number;
  sha256: string;
  encrypted: boolean;
  keyId: string | null;
  tableCounts: Record<string, number>;
  lastVerification: { at: string; ok: boolean; detail: string; trigger: string } | null;
}

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface VerifyReport {
  ok: boolean;
  backup: BackupRecord;
  durationMs: number;
  checks: Check[];
}

export type Progress = (done: number, total: number) => void;

/** A backup that no selection names; the message lists what there is. */
export class BackupSelectionError extends Error {
  readonly code = 'BACKUP_SELECTION';
}

/** A verification stopped before its end (its signal aborted): no verdict, nothing recorded. */
export class VerifyAbortedError extends Error {
  readonly code = 'VERIFY_ABORTED';
}

/** A restore the command line must say more for (--clean, --overwrite-source), or cannot do. */
export class RestoreRefusedError extends Error {
  readonly code = 'RESTORE_REFUSED';
}

function location(destination: string, objectKey: string): string {
  if (destination.startsWith('directory ')) return join(destination.slice('directory '.length), objectKey);
  const s3 = /^s3:\/\/([^ ]+)( at .+)?$/.exec(destination);
  return s3 ? `s3://${s3[1]}/${objectKey}${s3[2] ?? ''}` : `${destination} ${objectKey}`;
}

export async function listBackups(db: Kysely<Database>, job: string): Promise<BackupRecord[]> {
  const rows = await db
    .selectFrom('backups')
    .selectAll()
    .where('job', '=', job)
    .where('deleted_at', 'is', null)
    .orderBy('window_start', 'desc')
    .execute();
  const checks = await db
    .selectFrom('backup_checks')
    .distinctOn('window_key')
    .select(['window_key', 'at', 'ok', 'detail', 'trigger'])
    .where('job', '=', job)
    .where('kind', '=', 'verify')
    .orderBy('window_key')
    .orderBy('at', 'desc')
    .execute();
  const last = new Map(checks.map((c) => [c.window_key, c]));
  return rows.map((r) => {
    const v = last.get(r.window_key);
    return {
      job: r.job,
      windowKey: r.window_key,
      windowStart: r.window_start.toISOString(),
      dumpedAt: (r.dumped_at ?? r.created_at).toISOString(),
      location: location(r.destination, r.object_key),
      destination: r.destination,
      objectKey: r.object_key,
      bytes: Number(r.bytes),
      sha256: r.sha256,
      encrypted: r.encrypted,
      keyId: r.key_id,
      tableCounts: r.table_counts as Record<string, number>,
      lastVerification: v ? { at: v.at.toISOString(), ok: v.ok, detail: v.detail, trigger: v.trigger } : null,
    };
  });
}

/** --key (a window key or an object key), --at (the newest dumped at or before), else the newest. */
export async function pickBackup(
  db: Kysely<Database>,
  job: string,
  sel: { at?: Date; key?: string },
): Promise<BackupRecord> {
  const all = await listBackups(db, job);
  if (all.length === 0)
    throw new BackupSelectionError(
      `job ${job} has no published backups (a window publishes one when it ran)`,
    );
  const known = () =>
    `; the newest: ${all
      .slice(0, 5)
      .map((b) => `${b.windowKey} (dumped ${b.dumpedAt})`)
      .join(', ')} (tidemark backups list ${job})`;
  if (sel.key) {
    const b = all.find((x) => x.windowKey === sel.key || x.objectKey === sel.key);
    if (!b) throw new BackupSelectionError(`job ${job} has no backup with key ${sel.key}${known()}`);
    return b;
  }
  if (sel.at) {
    const b = all
      .filter((x) => Date.parse(x.dumpedAt) <= sel.at!.getTime())
      .sort((x, y) => Date.parse(y.dumpedAt) - Date.parse(x.dumpedAt))[0];
    if (!b)
      throw new BackupSelectionError(
        `job ${job} has no backup dumped at or before ${sel.at.toISOString()}${known()}`,
      );
    return b;
  }
  return all[0]!;
}

/** The stored object as it is checked on its way: size and SHA-256, then decrypted with its key. */
async function checkedStream(bj: BackupJob, rec: BackupRecord, onBytes?: (n: number) => void) {
  if (rec.destination !== bj.destination.describe)
    throw new Error(
      `backup ${rec.windowKey} is in ${rec.destination}, but job ${bj.name} is configured with ${bj.destination.describe} now: point the job at the old destination to read it`,
    );
  const raw: Readable = await bj.destination.read(rec.objectKey);
  const stages: (Readable | Transform)[] = [raw, expectDigest(rec, onBytes)];
  if (rec.encrypted) {
    const source = bj.encryption ? describeKeySource(bj.encryption) : undefined;
    const keyFor: KeyLookup = (id) => {
      // Read here, in the decryptor: a variable or file that fails is the key check's failure,
      // reported after size and SHA-256 like a key that is missing from the list.
      let keys: ReturnType<BackupJob['keys']>;
      try {
        keys = bj.keys();
      } catch (err) {
        throw new BackupCheckError('key', (err as Error).message);
      }
      if (!keys)
        throw new BackupCheckError(
          'key',
          `the backup is encrypted, and job ${bj.name} names no keys now: configure its encryption (${source ?? 'encryption: { env } or { file }'})`,
        );
      const wanted = id ?? rec.keyId ?? undefined;
      // Written before key ids (no header, none recorded): any key of the list, the current one first.
      if (wanted === undefined) return [keys.current.key, ...[...keys.byId.values()].map((k) => k.key)];
      const k = keys.byId.get(wanted);
      if (!k)
        throw new BackupCheckError(
          'key',
          `the backup was encrypted with key id "${wanted}", which ${source} does not hold (it holds ${[...keys.byId.keys()].join(', ')}): add that key back to the list, after the current one`,
        );
      return k.key;
    };
    stages.push(decryptor(keyFor));
  }
  return stages;
}

/** Streams a backup through every check and records the result; a bad backup is ok:false, not a throw. */
export async function verifyBackup(
  db: Kysely<Database>,
  bj: BackupJob,
  rec: BackupRecord,
  opts: { trigger?: string; onProgress?: Progress; signal?: AbortSignal } = {},
): Promise<VerifyReport> {
  const started = Date.now();
  const checks: Check[] = [];
  const fail = (name: string, detail: string) => checks.push({ name, ok: false, detail });
  let stages: (Readable | Transform)[] | undefined;
  try {
    stages = await checkedStream(bj, rec, (n) => opts.onProgress?.(n, rec.bytes));
  } catch (err) {
    fail('read', (err as Error).message);
  }
  if (stages) {
    checks.push({ name: 'read', ok: true, detail: rec.location });
    const fed = await feedRestore(chain(stages, opts.signal), ['--list']);
    // Stopped (the page's browser went away): no verdict on the backup, so nothing is recorded.
    if (opts.signal?.aborted) throw new VerifyAbortedError(`verification of ${rec.windowKey} was stopped`);
    const e = fed.inputError;
    if (e instanceof BackupCheckError) {
      // Size, then SHA-256, then the key and the tag, all at the stream's end: a later one failing means the earlier passed.
      if (e.check !== 'size')
        checks.push({ name: 'size', ok: true, detail: `${rec.bytes} bytes as recorded` });
      if (e.check === 'gcm-tag' || e.check === 'key')
        checks.push({ name: 'sha256', ok: true, detail: `${rec.sha256} as recorded` });
      fail(e.check, e.message);
    } else if (e) fail('read', e.message);
    else {
      checks.push(
        { name: 'size', ok: true, detail: `${rec.bytes} bytes as recorded` },
        { name: 'sha256', ok: true, detail: `${rec.sha256} as recorded` },
      );
      if (rec.encrypted)
        checks.push({ name: 'gcm-tag', ok: true, detail: `authentic, key ${rec.keyId ?? '(not recorded)'}` });
      if (fed.code !== 0) fail('toc', `pg_restore --list exited with ${fed.code}: ${fed.stderr}`);
      else {
        const entries = [...fed.stdout.matchAll(/TABLE DATA (\S+) (\S+) /g)];
        const data = new Set(entries.flatMap((m) => [`${m[1]}.${m[2]}`, m[2]!]));
        checks.push({
          name: 'toc',
          ok: true,
          detail: `pg_restore --list: ${entries.length} table(s) with data`,
        });
        const missing = Object.keys(rec.tableCounts).filter((t) => !data.has(t));
        if (missing.length) fail('tables', `no data in the dump for ${missing.join(', ')}`);
        else
          checks.push({
            name: 'tables',
            ok: true,
            detail: `${Object.keys(rec.tableCounts).length} counted table(s) present`,
          });
      }
    }
  }
  const report = { ok: checks.every((c) => c.ok), backup: rec, durationMs: Date.now() - started, checks };
  await record(db, rec, 'verify', opts.trigger ?? 'cli', report.ok, summary(checks), report.durationMs);
  return report;
}

function summary(checks: Check[]): string {
  const bad = checks.filter((c) => !c.ok);
  return bad.length
    ? bad.map((c) => `${c.name}: ${c.detail}`).join('; ')
    : `${checks.map((c) => c.name).join(', ')} ok`;
}

async function record(
  db: Kysely<Database>,
  rec: BackupRecord,
  kind: 'verify' | 'drill',
  trigger: string,
  ok: boolean,
  detail: string,
  durationMs: number,
): Promise<void> {
  await db
    .insertInto('backup_checks')
    .values({ job: rec.job, window_key: rec.windowKey, kind, trigger, ok, detail, duration_ms: durationMs })
    .execute();
}

/** The stages piped into one stream to read; any stage's failure (a read, a check at the end) fails its reader. */
function chain(stages: (Readable | Transform)[], signal?: AbortSignal): AsyncIterable<Buffer> {
  const out = new PassThrough();
  // pipeline() destroys every stage with the first failure, `out` included: its reader sees it.
  // An interruption (Ctrl-C) is such a failure.
  pipeline([...stages, out], ...(signal ? [{ signal }] : [])).catch(() => undefined);
  return out;
}

/** What an interruption says (Ctrl-C, SIGTERM), instead of the AbortError's "This operation was aborted". */
const interrupted = (err: Error, signal?: AbortSignal) =>
  signal?.aborted ? new Error('interrupted (Ctrl-C or SIGTERM) before the restore finished') : err;

export interface RestoreReport {
  ok: boolean;
  backup: BackupRecord;
  target: string;
  created: boolean;
  counts: { table: string; dumped: number; restored: number }[];
  durationMs: number;
  /** What went wrong and the state the target is left in. */
  problem?: string;
}

const adminUrl = (url: string) => {
  const u = new URL(url);
  u.pathname = '/postgres';
  return u.toString();
};

function databaseName(url: string): string {
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
async function createIfMissing(url: string, name: string): Promise<boolean> {
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

async function dropDatabase(url: string, name: string): Promise<void> {
  const admin = pgClient(adminUrl(url));
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

/** Relations outside the system schemas: what a restore without --clean would collide with. */
async function relationsIn(url: string): Promise<number> {
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

export interface RestoreOptions {
  into: string;
  /** Drop the backup's objects in the target first (pg_restore --clean --if-exists). */
  clean?: boolean;
  /** The target is the job's own source database, and that is meant. */
  overwriteSource?: boolean;
  /** tidemark's own ledger (DATABASE_URL): never a target, unless it is the job's source and that is meant. */
  ledger?: string;
  /** Aborted: pg_restore is stopped before its input ends, and the restore reports what is left. */
  signal?: AbortSignal;
  onProgress?: Progress;
}

/** Restores a backup into a database: all of it or nothing (see the top of this file). */
export async function restoreBackup(
  bj: BackupJob,
  rec: BackupRecord,
  opts: RestoreOptions,
): Promise<RestoreReport> {
  const started = Date.now();
  const name = databaseName(opts.into);
  const target = redactUrl(opts.into);
  if (!opts.overwriteSource && (await sameDatabase(bj.database, opts.into)))
    throw new RestoreRefusedError(
      `${target} is the database job ${bj.name} backs up: restoring into it replaces production data. Restore into another database and compare, or add --clean --overwrite-source if that is really meant`,
    );
  if (opts.ledger && (await sameDatabase(opts.ledger, opts.into)) && !opts.overwriteSource)
    throw new RestoreRefusedError(
      `${target} is tidemark's own ledger (DATABASE_URL): restoring into it would mix the backup's tables with the ledger's. Restore into a database of its own`,
    );
  return exclusively(opts.into, name, () => restoreInto(bj, rec, opts, name, started));
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

async function restoreInto(
  bj: BackupJob,
  rec: BackupRecord,
  opts: RestoreOptions,
  name: string,
  started: number,
): Promise<RestoreReport> {
  const target = redactUrl(opts.into);
  const created = await createIfMissing(opts.into, name);
  if (!created && !opts.clean) {
    const n = await relationsIn(opts.into);
    if (n > 0)
      throw new RestoreRefusedError(
        `${target} is not empty (${n} table(s), view(s) or sequence(s)): restore into a new database name, or add --clean to drop the backup's objects there first`,
      );
  }
  const stages = await checkedStream(bj, rec, (n) => opts.onProgress?.(n, rec.bytes)).catch(async (err) => {
    if (created) await dropDatabase(opts.into, name);
    throw err;
  });
  const fed = await feedRestore(
    chain(stages, opts.signal),
    [
      '--no-owner',
      '--no-privileges',
      '--single-transaction',
      '--exit-on-error',
      ...(opts.clean ? ['--clean', '--if-exists'] : []),
    ],
    opts.into,
  );
  const base = { backup: rec, target, created, durationMs: 0 };
  if (fed.inputError || fed.code !== 0) {
    const failure = fed.inputError && interrupted(fed.inputError, opts.signal);
    const why = failure
      ? `${failure instanceof BackupCheckError ? `${failure.check} check failed: ` : ''}${failure.message}`
      : `pg_restore exited with ${fed.code}: ${fed.stderr}`;
    if (created) await dropDatabase(opts.into, name);
    return {
      ...base,
      ok: false,
      counts: [],
      durationMs: Date.now() - started,
      problem: `${why}. Nothing was restored: ${created ? `the database ${name} this restore created was dropped again` : `the restore ran in one transaction, which was rolled back; ${name} is as it was`}`,
    };
  }
  const c = pgClient(opts.into);
  await c.connect();
  const got = await countRows(c, Object.keys(rec.tableCounts)).finally(() => c.end());
  const counts = Object.entries(rec.tableCounts).map(([table, dumped]) => ({
    table,
    dumped,
    restored: got[table]!,
  }));
  const wrong = counts.filter((x) => x.dumped !== x.restored);
  return {
    ...base,
    ok: wrong.length === 0,
    counts,
    durationMs: Date.now() - started,
    ...(wrong.length
      ? {
          problem: `row counts differ from those at dump time: ${wrong.map((x) => `${x.table} ${x.restored} restored, ${x.dumped} dumped`).join('; ')}. ${name} holds the restored backup: check it before use, or drop it`,
        }
      : {}),
  };
}

/** Writes the plain (decrypted) pg_dump archive to `file` (mode 0600), all checks passed, or nothing. */
export async function writePlainDump(
  bj: BackupJob,
  rec: BackupRecord,
  file: string,
  onProgress?: Progress,
  signal?: AbortSignal,
): Promise<{ file: string; bytes: number }> {
  if (
    await stat(file).then(
      () => true,
      () => false,
    )
  )
    throw new RestoreRefusedError(`--to-file: ${file} exists; name a new file (nothing is overwritten)`);
  const part = `${file}.part-${process.pid}`;
  const stages = await checkedStream(bj, rec, (n) => onProgress?.(n, rec.bytes));
  let bytes = 0;
  try {
    await pipeline(
      chain(stages, signal),
      async function* (src: AsyncIterable<Buffer>) {
        for await (const chunk of src) {
          bytes += chunk.length;
          yield chunk;
        }
      },
      createWriteStream(part, { flags: 'wx', mode: 0o600 }),
    );
    const fh = await open(part, 'r');
    await fh.sync();
    await fh.close();
    // link(), not rename(): it fails if `file` appeared meanwhile (another restore, another program),
    // where rename() would replace it. The stat above only makes the usual case fail early.
    await link(part, file).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST')
        throw new RestoreRefusedError(
          `--to-file: ${file} exists (it appeared while the backup was written); name a new file (nothing is overwritten)`,
        );
      throw err;
    });
    await rm(part, { force: true });
    const dir = await open(dirname(file), 'r');
    await dir.sync().catch(() => undefined);
    await dir.close();
  } catch (err) {
    await rm(part, { force: true });
    throw interrupted(err as Error, signal);
  }
  return { file, bytes };
}

export interface DrillReport extends RestoreReport {
  scratch: string;
}

/**
 * The restore drill on demand: the newest backup restored into the job's scratch database
 * (restoreCheck.scratchDatabaseUrl), counted and dropped; recorded either way.
 */
export async function runDrill(db: Kysely<Database>, bj: BackupJob, trigger: string): Promise<DrillReport> {
  if (!bj.drill)
    throw new RestoreRefusedError(
      `job ${bj.name} has no restoreCheck: give it restoreCheck: { every, scratchDatabaseUrl } in the catalog so a drill has a scratch database`,
    );
  const scratch = bj.drill.scratchDatabaseUrl;
  const name = databaseName(scratch);
  await refuseSourceAsScratch(bj.name, bj.database, scratch, db);
  for (let attempt = 1; ; attempt++) {
    const rec = await pickBackup(db, bj.name, {});
    const report = await exclusively(scratch, name, async (): Promise<RestoreReport> => {
      await dropDatabase(scratch, name);
      try {
        return await restoreInto(bj, rec, { into: scratch }, name, Date.now());
      } catch (err) {
        return {
          ok: false,
          backup: rec,
          target: redactUrl(scratch),
          created: false,
          counts: [],
          durationMs: 0,
          problem: (err as Error).message,
        };
      } finally {
        await dropDatabase(scratch, name).catch(() => undefined);
      }
    });
    // Retention removed the backup while the drill started (a window published a newer one): its
    // failure says nothing of the backups, and would open a false incident. Drill the newest again.
    if (!report.ok && attempt < 3 && (await removedSince(db, rec))) continue;
    const detail = report.ok
      ? `restored into ${name}, ${report.counts.length} table(s) counted as dumped, dropped`
      : report.problem!;
    await record(db, rec, 'drill', trigger, report.ok, detail, report.durationMs);
    return { ...report, scratch: redactUrl(scratch) };
  }
}

/** Whether a backup listed as live is deleted now (by retention) or gone from the ledger. */
async function removedSince(db: Kysely<Database>, rec: BackupRecord): Promise<boolean> {
  const row = await db
    .selectFrom('backups')
    .select('deleted_at')
    .where('job', '=', rec.job)
    .where('window_key', '=', rec.windowKey)
    .executeTakeFirst();
  return !row || row.deleted_at !== null;
}

/**
 * The job's newest drill: a recorded one (on demand, or a window's that passed), a window that
 * failed its drill (its transaction rolled back; the failure is in its run record and incident), or
 * a backup a window of the previous release drilled (restore_checked, recorded nowhere else: its
 * workers keep running while a new release rolls out, and a job drilled yesterday is not "never").
 */
export async function lastDrill(
  db: Kysely<Database>,
  job: string,
): Promise<{ at: string; ok: boolean; detail: string; windowKey: string; trigger: string } | null> {
  const recorded = await db
    .selectFrom('backup_checks')
    .select(['at', 'ok', 'detail', 'window_key', 'trigger'])
    .where('job', '=', job)
    .where('kind', '=', 'drill')
    .orderBy('at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const failed = await db
    .selectFrom('job_runs')
    .select(['finished_at', 'reason', 'window_start'])
    .where('job', '=', job)
    .where('kind', '=', 'window')
    .where('outcome', '=', 'failed')
    .where('reason', 'like', `${DRILL_FAILED}%`)
    .orderBy('finished_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const legacy = await db
    .selectFrom('backups as b')
    .select(['b.created_at', 'b.window_key'])
    .where('b.job', '=', job)
    .where('b.restore_checked', '=', true)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('backup_checks as c')
            .select('c.id')
            .whereRef('c.job', '=', 'b.job')
            .whereRef('c.window_key', '=', 'b.window_key')
            .where('c.kind', '=', 'drill'),
        ),
      ),
    )
    .orderBy('b.created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const found = [
    recorded && {
      at: recorded.at,
      ok: recorded.ok,
      detail: recorded.detail,
      windowKey: recorded.window_key,
      trigger: recorded.trigger,
    },
    failed && {
      at: failed.finished_at,
      ok: false,
      detail: failed.reason!.slice(DRILL_FAILED.length).trim(),
      windowKey: `${job}/${failed.window_start!.toISOString().replace('.000Z', 'Z')}`,
      trigger: 'schedule',
    },
    legacy && {
      at: legacy.created_at,
      ok: true,
      detail: 'restored into the scratch database and counted by the window (before drills were recorded)',
      windowKey: legacy.window_key,
      trigger: 'schedule',
    },
  ].filter((d) => !!d);
  // The newest of them; a tie goes to the recorded drill, then the failed window.
  const newest = found.reduce<(typeof found)[number] | undefined>(
    (a, d) => (!a || d.at > a.at ? d : a),
    undefined,
  );
  return newest ? { ...newest, at: newest.at.toISOString() } : null;
}
