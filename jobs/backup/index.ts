// Job kind "database backup": pg_dump (custom format, compressed) of a database, SHA-256 while
// streaming, optional encryption at rest, written to a staging name, read back and compared,
// listed with pg_restore, optionally restored into a scratch database with row counts compared,
// and only then published. Retention keeps N daily, weekly and monthly backups. A failed or
// killed pg_dump, a cut-off upload or a checksum mismatch publishes nothing, and the failed
// window alerts.
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DateTime } from 'luxon';
import pg from 'pg';
import { sql, type Transaction } from 'kysely';
import { ensureDatabase } from '../../db/database.js';
import { pgClient } from '../../db/pg-connection.js';
import type { Database } from '../../db/schema.js';
import { type JobSpec, type WindowHandler } from '../../schedules/job.js';
import { JobDefinitionError } from '../../schedules/define.js';
import { windowIndex } from '../../schedules/window-index.js';
import { isoUtc } from '../../contract/window-key.js';
import type { Destination } from './destination.js';
import { pgRestore, startDump, type Dump } from './pg.js';
import { countRows } from './counts.js';
import { backupKeys, type BackupKeySource } from './keys.js';
import { DRILL_FAILED, DRILL_SUBJECT, registerBackupJob } from './registry.js';
import { exclusively, refuseSourceAsScratch } from './target.js';
import { decryptor, Digest, encryptor, type KeyLookup } from './streams.js';

export interface BackupOptions extends Omit<JobSpec, 'handler' | 'seed'> {
  /** postgres:// URL of the database to back up. */
  database: string;
  destination: Destination;
  /** Object names start with this; default "<job name>/". */
  prefix?: string;
  /**
   * Encryption at rest (AES-256-GCM) with the keys an environment variable or a file holds
   * ("k2:<base64>,k1:<base64>": the first encrypts, all decrypt), read at every use.
   */
  encryption?: BackupKeySource;
  retention: { daily: number; weekly: number; monthly: number };
  /** Tables whose row counts are recorded (from the dump's own snapshot) and compared after a full restore. */
  tables: string[];
  /**
   * The restore drill: every `every`-th window of the grid (counted from `start`, else from the
   * epoch) restores its backup into this scratch database, counts the rows and drops it, before
   * the backup is published; a failed drill fails the window, which opens an incident.
   * `tidemark backups drill <job>` runs one on demand.
   */
  restoreCheck?: { every: number; scratchDatabaseUrl: string };
  /** Test seam: sees the pg_dump process once it started. */
  onDump?: (dump: Dump) => void;
}

async function sha256Of(stream: Readable): Promise<{ hex: string; bytes: number }> {
  const d = new Digest();
  await pipeline(stream, d, new Writable({ write: (_chunk, _enc, cb) => cb() }));
  return { hex: d.hex(), bytes: d.bytes };
}

/** Which backups retention keeps: the newest N, the newest of the last N ISO weeks, and of the last N months. */
export function keepSet(
  starts: { key: string; start: Date }[],
  r: BackupOptions['retention'],
  zone: string,
): Set<string> {
  const sorted = [...starts].sort((a, b) => b.start.getTime() - a.start.getTime());
  const keep = new Set(sorted.slice(0, r.daily).map((b) => b.key));
  for (const [unit, n] of [
    ['week', r.weekly],
    ['month', r.monthly],
  ] as const) {
    const seen = new Set<string>();
    for (const b of sorted) {
      const bucket = DateTime.fromJSDate(b.start, { zone }).startOf(unit).toISODate()!;
      if (seen.has(bucket)) continue;
      if (seen.size >= n) break;
      seen.add(bucket);
      keep.add(b.key);
    }
  }
  return keep;
}

export function databaseBackup(opts: BackupOptions): JobSpec {
  // A catalog written for 0.1.0 (a key in code): refused, not quietly writing unencrypted backups.
  if ('encryptionKey' in opts)
    throw new JobDefinitionError(
      opts.name,
      'encryptionKey',
      'is gone: keys never live in code. Write encryption: { env: \'VARIABLE\' } or { file: \'/path\' }, holding "k1:<base64 of the same 32 bytes>" (docs/restore.md, "Keys"); backups written with the old key still restore with it',
    );
  const { database, destination, encryption, retention, tables, restoreCheck, onDump, ...spec } = opts;
  if (encryption && !('env' in encryption && encryption.env) && !('file' in encryption && encryption.file))
    throw new JobDefinitionError(
      opts.name,
      'encryption',
      "names no keys: write { env: 'VARIABLE' } (an environment variable) or { file: '/path' } (a key file)",
    );
  const prefix = opts.prefix ?? `${opts.name}/`;
  const keys = () => (encryption ? backupKeys(opts.name, encryption) : undefined);

  // Its bookkeeping is tidemark's own (backups, backup_checks): the transaction that names their schema.
  const handler: WindowHandler = async ({ ledger: trx, job, window, key, log }) => {
    const ring = keys();
    const keyFor: KeyLookup = () => ring!.current.key;
    const plain = (s: Readable) => (ring ? s.pipe(decryptor(keyFor)) : s);
    const objectKey = `${prefix}${isoUtc(window.start).replace(/[-:]/g, '')}.dump${ring ? '.enc' : ''}`;
    // One snapshot for the counts and the dump, so they describe the same data.
    const snap = pgClient(database);
    // Held for the whole dump: a source restart must fail this window, not kill the worker.
    snap.on('error', () => undefined);
    await snap.connect();
    let counts: Record<string, number>;
    let digest: Digest;
    let dumpedAt: Date;
    try {
      await snap.query('begin isolation level repeatable read read only');
      dumpedAt = (await snap.query<{ t: Date }>('select now() as t')).rows[0]!.t;
      const snapshot = (await snap.query<{ s: string }>('select pg_export_snapshot() as s')).rows[0]!.s;
      counts = await countRows(snap, tables);
      const dump = startDump(database, { snapshot });
      onDump?.(dump);
      digest = new Digest();
      const body = ring ? dump.stream.pipe(encryptor(ring.current)) : dump.stream;
      dump.stream.once('error', (err) => body.destroy(err));
      try {
        await Promise.all([destination.putStaging(objectKey, body.pipe(digest)), dump.done]);
      } catch (err) {
        await destination.discardStaging(objectKey);
        throw err;
      }
    } finally {
      await snap.end().catch(() => undefined);
    }
    const written = { hex: digest.hex(), bytes: digest.bytes };
    let drilled = false;
    try {
      const stored = await sha256Of(await destination.readStaging(objectKey));
      if (stored.hex !== written.hex || stored.bytes !== written.bytes) {
        throw new Error(
          `checksum mismatch for ${objectKey}: wrote ${written.bytes} bytes sha256 ${written.hex}, read back ${stored.bytes} bytes sha256 ${stored.hex}`,
        );
      }
      const listing = await pgRestore(plain(await destination.readStaging(objectKey)), ['--list']);
      if (!/TABLE DATA/.test(listing))
        throw new Error(`pg_restore --list of ${objectKey} shows no table data`);
      // Counted on the job's grid from its start, or from the epoch for a job without one: a
      // position relative to the window itself would make every window the first.
      const index =
        windowIndex(job.grid, job.timezone, window.start) -
        (job.start ? windowIndex(job.grid, job.timezone, job.start) : 0);
      const checkRestore = !!restoreCheck && index % restoreCheck.every === 0;
      const drillStarted = Date.now();
      if (checkRestore)
        await restoreAndCompare(trx, objectKey, counts, restoreCheck!.scratchDatabaseUrl, plain).catch(
          (err) => {
            throw new Error(`${DRILL_FAILED} ${(err as Error).message}`, { cause: err });
          },
        );
      drilled = checkRestore;
      await destination.publish(objectKey);
      log(
        `BACKUP job=${job.name} window=${key} ${destination.describe}/${objectKey} ${written.bytes} bytes sha256=${written.hex}${checkRestore ? ' restore-checked' : ''}`,
      );
      await trx
        .insertInto('backups')
        .values({
          job: job.name,
          window_key: key,
          window_start: window.start,
          destination: destination.describe,
          object_key: objectKey,
          bytes: written.bytes,
          sha256: written.hex,
          encrypted: !!ring,
          key_id: ring?.current.id ?? null,
          dumped_at: dumpedAt,
          table_counts: JSON.stringify(counts),
          restore_checked: checkRestore,
        })
        .onConflict((oc) =>
          oc.columns(['job', 'window_key']).doUpdateSet({
            bytes: written.bytes,
            sha256: written.hex,
            object_key: objectKey,
            encrypted: !!ring,
            key_id: ring?.current.id ?? null,
            dumped_at: dumpedAt,
            table_counts: JSON.stringify(counts),
            restore_checked: checkRestore,
            deleted_at: null,
          }),
        )
        .execute();
      if (checkRestore)
        await trx
          .insertInto('backup_checks')
          .values({
            job: job.name,
            window_key: key,
            kind: 'drill',
            trigger: 'schedule',
            ok: true,
            detail: `restored into the scratch database, ${Object.keys(counts).length} table(s) counted as dumped, dropped`,
            duration_ms: Date.now() - drillStarted,
            // When the drill ended, not now(): that is the window's transaction start, before the
            // dump, and an on-demand drill that failed meanwhile would read as the newer one.
            at: sql<Date>`clock_timestamp()`,
          })
          .execute();
    } catch (err) {
      await destination.discardStaging(objectKey);
      throw err;
    }
    const removed = await applyRetention(trx, job.name, job.timezone);
    return {
      input: 1,
      applied: 1,
      quarantined: 0,
      details: { objectKey, bytes: written.bytes, sha256: written.hex, counts, removed },
      // A passing drill: the job's backups restore again, as `tidemark backups drill` passing says.
      ...(drilled ? { recovered: [{ subject: DRILL_SUBJECT, note: `window drill of ${key} passed` }] } : {}),
    };
  };

  async function restoreAndCompare(
    trx: Transaction<Database>,
    objectKey: string,
    expected: Record<string, number>,
    scratchUrl: string,
    plain: (s: Readable) => Readable,
  ): Promise<void> {
    await refuseSourceAsScratch(opts.name, database, scratchUrl, trx);
    const name = decodeURIComponent(new URL(scratchUrl).pathname.slice(1));
    const admin = new URL(scratchUrl);
    admin.pathname = '/postgres';
    const drop = async () => {
      const c = pgClient(admin.toString());
      try {
        await c.connect();
        await c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      } finally {
        await c.end().catch(() => undefined);
      }
    };
    // One drill (or restore) at a time into the scratch database: an on-demand drill restoring
    // into it must not have it dropped under it, nor drop this one's.
    await exclusively(
      scratchUrl,
      name,
      async () => {
        await drop();
        await ensureDatabase(scratchUrl);
        try {
          await pgRestore(
            plain(await destination.readStaging(objectKey)),
            ['--no-owner', '--exit-on-error'],
            scratchUrl,
          );
          const c = pgClient(scratchUrl);
          await c.connect();
          const got = await countRows(c, Object.keys(expected)).finally(() => c.end());
          const wrong = Object.keys(expected).filter((t) => got[t] !== expected[t]);
          if (wrong.length)
            throw new Error(
              `restore check of ${objectKey}: row counts differ for ${wrong.map((t) => `${t} (${got[t]} restored, ${expected[t]} dumped)`).join(', ')}`,
            );
        } finally {
          await drop();
        }
      },
      { wait: true },
    );
  }

  async function applyRetention(
    trx: Transaction<Database>,
    jobName: string,
    zone: string,
  ): Promise<string[]> {
    const live = await trx
      .selectFrom('backups')
      .select(['window_key', 'window_start', 'object_key'])
      .where('job', '=', jobName)
      .where('deleted_at', 'is', null)
      .execute();
    const keep = keepSet(
      live.map((b) => ({ key: b.window_key, start: b.window_start })),
      retention,
      zone,
    );
    const removed: string[] = [];
    for (const b of live) {
      if (keep.has(b.window_key)) continue;
      await destination.remove(b.object_key);
      await trx
        .updateTable('backups')
        .set({ deleted_at: new Date() })
        .where('job', '=', jobName)
        .where('window_key', '=', b.window_key)
        .execute();
      removed.push(b.object_key);
    }
    return removed;
  }

  registerBackupJob(handler, {
    name: opts.name,
    database,
    destination,
    tables,
    keys,
    ...(encryption ? { encryption } : {}),
    ...(restoreCheck ? { drill: restoreCheck } : {}),
  });
  return {
    description: `Backups of ${new URL(database).pathname.slice(1)} to ${destination.describe}`,
    ...spec,
    noPreview: 'it dumps the database and stores the dump as it runs, which no rollback would undo',
    handler,
  };
}
