// Job kind "data sync": records of a source table (another PostgreSQL database) copied per
// window into one or more target tables in the ledger's database, in the ledger transaction:
// keyed upserts, deletes (rows with a deletion time), a version guard so an older window never
// overwrites a newer row, and a reconciliation of counts and checksums per window whose
// mismatches alert with the differing keys. A window is not read while a source transaction
// that could still commit rows into it is open (commit-order safety).
import { ApplicationFailure } from '@temporalio/common';
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import { createDb } from '../db/database.js';
import type { Database } from '../db/schema.js';
import type { JobSpec, WindowHandler } from '../schedules/job.js';

export interface SyncSource {
  /** postgres:// URL of the source system's database (read only). */
  url: string;
  /** Table, optionally schema-qualified: "public.customers". */
  table: string;
  key: string;
  /** Columns copied as they are (the key and the version column are added). */
  columns: string[];
  /** The row's version: set to now() by every write (the transaction's start time). */
  updatedAt: string;
  /** When set, a row with a value here is deleted from the targets. */
  deletedAt?: string;
}

export interface SyncTarget {
  /** Table in the ledger database, optionally schema-qualified, with the same column names. */
  table: string;
}

export interface DataSyncOptions extends Omit<JobSpec, 'handler' | 'seed'> {
  source: SyncSource;
  targets: SyncTarget[];
}

type Row = Record<string, unknown>;
const BATCH = 500;

const ident = (qualified: string): RawBuilder<unknown> => sql.id(...qualified.split('.'));

const sources = new Map<string, Kysely<Database>>();
function sourceDb(url: string): Kysely<Database> {
  let db = sources.get(url);
  // The source is another database: its tables are named as the sync names them, never the ledger's.
  if (!db) sources.set(url, (db = createDb(url, { max: 4 }).withoutPlugins()));
  return db;
}

/** Closes the source connections this process opened (tests and shutdown). */
export async function closeSyncSources(): Promise<void> {
  await Promise.all([...sources.values()].map((db) => db.destroy()));
  sources.clear();
}

async function upsert(
  trx: Transaction<Database>,
  target: string,
  s: SyncSource,
  rows: Row[],
): Promise<number> {
  const cols = [s.key, ...s.columns, s.updatedAt];
  let n = 0;
  for (let i = 0; i < rows.length; i += BATCH) {
    const batch = rows.slice(i, i + BATCH);
    const result = await sql`
      insert into ${ident(target)} (${sql.join(cols.map((c) => sql.id(c)))})
      values ${sql.join(batch.map((r) => sql`(${sql.join(cols.map((c) => r[c]))})`))}
      on conflict (${sql.id(s.key)}) do update
        set ${sql.join([...s.columns, s.updatedAt].map((c) => sql`${sql.id(c)} = excluded.${sql.id(c)}`))}
        where ${ident(target)}.${sql.id(s.updatedAt)} <= excluded.${sql.id(s.updatedAt)}`.execute(trx);
    n += Number(result.numAffectedRows ?? 0);
  }
  return n;
}

async function remove(
  trx: Transaction<Database>,
  target: string,
  s: SyncSource,
  rows: Row[],
): Promise<number> {
  if (rows.length === 0) return 0;
  const result = await sql`
    delete from ${ident(target)} t
     using unnest(${rows.map((r) => String(r[s.key]))}::text[], ${rows.map((r) => r[s.updatedAt])}::timestamptz[]) as d(k, v)
     where t.${sql.id(s.key)}::text = d.k and t.${sql.id(s.updatedAt)} <= d.v`.execute(trx);
  return Number(result.numAffectedRows ?? 0);
}

/** key -> checksum of the copied columns, for the given keys. */
async function checksums(
  db: Kysely<Database> | Transaction<Database>,
  table: string,
  s: SyncSource,
  keys: string[],
  extra: RawBuilder<unknown> = sql`true`,
): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const result = await sql<{ k: string; h: string }>`
    select ${sql.id(s.key)}::text as k, md5(row(${sql.join(s.columns.map((c) => sql.id(c)))})::text) as h
      from ${ident(table)} where ${sql.id(s.key)}::text = any(${keys}::text[]) and ${extra}`.execute(db);
  return new Map(result.rows.map((r) => [r.k, r.h]));
}

export function dataSync(opts: DataSyncOptions): JobSpec {
  const { source: s, targets, ...spec } = opts;
  const handler: WindowHandler = async (ctx) => {
    const { trx, window } = ctx;
    const src = sourceDb(s.url);
    // Rows are stamped with their transaction's start: one still open that began before the
    // window's end may yet commit rows into it, so the window waits for it.
    const inflight = await sql<{ n: number }>`
      select count(*)::int as n from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid() and backend_xid is not null and xact_start < ${window.end}`.execute(
      src,
    );
    if ((inflight.rows[0]?.n ?? 0) > 0) {
      throw ApplicationFailure.create({
        message: `source has ${inflight.rows[0]!.n} open transaction(s) that began before ${window.end.toISOString()}: waiting for them to commit`,
        type: 'SourceInFlight',
        nextRetryDelay: '2s',
      });
    }
    const cols = [s.key, ...s.columns, s.updatedAt, ...(s.deletedAt ? [s.deletedAt] : [])];
    const read = await sql<Row>`
      select ${sql.join(cols.map((c) => sql.id(c)))} from ${ident(s.table)}
       where ${sql.id(s.updatedAt)} >= ${window.start} and ${sql.id(s.updatedAt)} < ${window.end}
       order by ${sql.id(s.key)}`.execute(src);
    const rows = read.rows;
    const bad = rows.filter((r) => r[s.key] === null || r[s.key] === undefined);
    const good = rows.filter((r) => !bad.includes(r));
    const deleted = s.deletedAt ? good.filter((r) => r[s.deletedAt!] !== null) : [];
    const live = good.filter((r) => !deleted.includes(r));
    await ctx.quarantine(bad.map((r, i) => ({ key: `row-${i}`, reason: `${s.key} is missing`, payload: r })));

    const findings: { subject: string; message: string }[] = [];
    const keys = good.map((r) => String(r[s.key]));
    // The source's state of this window's keys, where a later window has not changed them since.
    const expected = await checksums(
      src,
      s.table,
      s,
      keys,
      sql`${sql.id(s.updatedAt)} < ${window.end}${s.deletedAt ? sql` and ${sql.id(s.deletedAt)} is null` : sql``}`,
    );
    const current = await checksums(src, s.table, s, keys);
    for (const t of targets) {
      await upsert(trx, t.table, s, live);
      await remove(trx, t.table, s, deleted);
      // Reconcile: every key of the window must now look in the target as in the source.
      const got = await checksums(trx, t.table, s, keys);
      const differing = [
        ...live
          .map((r) => String(r[s.key]))
          .filter((k) => current.get(k) === expected.get(k) && got.get(k) !== expected.get(k)),
        // A row deleted in this window (and not written again since) must be gone.
        ...deleted.map((r) => String(r[s.key])).filter((k) => !expected.has(k) && got.has(k)),
      ];
      if (differing.length > 0) {
        findings.push({
          subject: `reconcile:${t.table}`,
          message: `${t.table} differs from ${s.table} for ${differing.length} of ${keys.length} key(s) of the window (source ${expected.size} live rows, target ${[...got.keys()].filter((k) => expected.has(k)).length}): ${differing.slice(0, 20).join(', ')}${differing.length > 20 ? ', ...' : ''}`,
        });
      }
    }
    return { input: rows.length, applied: good.length, quarantined: bad.length, findings };
  };
  return {
    description: `Sync ${s.table} to ${targets.map((t) => t.table).join(', ')}`,
    writes: targets.map((t) => ({ table: t.table, key: [s.key] })),
    ...spec,
    handler,
  };
}
