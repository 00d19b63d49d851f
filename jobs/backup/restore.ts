// Restoring a backup into a database. The stored object streams once through its checks (size,
// SHA-256, the key and GCM tag) into pg_restore, which runs in one transaction and is killed
// before its input ends when a check fails, so a database is never left half-restored: it holds
// the whole backup or is as it was (and a database the restore created is dropped again).
import { pgClient, redactUrl } from '../../db/pg-connection.js';
import { chain, checkedStream, interrupted, type Progress } from './checked-stream.js';
import { countRows } from './counts.js';
import type { BackupRecord } from './listing.js';
import { feedRestore } from './pg.js';
import type { BackupJob } from './registry.js';
import { BackupCheckError } from './streams.js';
import {
  createIfMissing,
  databaseName,
  dropDatabase,
  exclusively,
  relationsIn,
  RestoreRefusedError,
  sameDatabase,
} from './target.js';

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

export async function restoreInto(
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
