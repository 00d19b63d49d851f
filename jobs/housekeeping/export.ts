// Quarantine rows written out before they are removed: one JSON Lines file per job, housekeeping
// window and id range, written to a temporary file, fsynced and renamed into place (and its
// directory fsynced) before the delete commits. A retry of the window after a crash between the two
// writes its own file again; another window (a catch-up window beside it, or one on another host)
// exporting the same rows writes a file of its own name, never over this one.
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { ledger } from '../../db/ledger-schema.js';
import type { Database } from '../../db/schema.js';

export interface QuarantineRow {
  readonly id: string;
  readonly job: string;
  readonly window_start: Date;
  readonly generation: number;
  readonly record_key: string;
  readonly reason: string;
  /** The jsonb as PostgreSQL prints it: parsed into JavaScript, numbers past a double would change. */
  readonly payload: string;
  readonly created_at: Date;
}

/** The select list of a QuarantineRow (a bare `id` in an `order by` is this text, not the bigint). */
export const QUARANTINE_COLUMNS = sql`id::text as id, job, window_start, generation, record_key, reason,
  payload::text as payload, created_at`;

const pad = (id: string): string => id.padStart(20, '0');

/** A window key (`tidemark-housekeeping/2026-11-27T00:00:00Z`) as a file name part: `2026-11-27T000000Z`. */
const windowPart = (key: string): string =>
  key
    .slice(key.indexOf('/') + 1)
    .replace(/:/g, '')
    .replace(/[^A-Za-z0-9.-]/g, '_');

/**
 * `<dir>/<job>/<window>_<first id>-<last id>.jsonl`: named by the housekeeping window that wrote
 * it, so two windows never write one file; ids zero-padded, so a window's files sort in id order.
 */
export const exportPath = (
  dir: string,
  job: string,
  window: string,
  rows: readonly QuarantineRow[],
): string =>
  join(dir, job, `${windowPart(window)}_${pad(rows[0]!.id)}-${pad(rows[rows.length - 1]!.id)}.jsonl`);

/**
 * A record as one JSON line. The payload is spliced in as the ledger's own JSON text (one line:
 * jsonb escapes control characters), never through a JavaScript number: 1e400 would become null,
 * 9007199254740993 ...992, in the only copy left once housekeeping deletes the row.
 */
export const toLine = (r: QuarantineRow): string =>
  `${JSON.stringify({
    id: r.id,
    job: r.job,
    window_start: r.window_start.toISOString(),
    generation: r.generation,
    record_key: r.record_key,
    reason: r.reason,
  }).slice(0, -1)},"payload":${r.payload},"created_at":${JSON.stringify(r.created_at.toISOString())}}`;

async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Makes `dir` (and its missing parents, 0700) and fsyncs the parent of each directory it made:
 * a new directory is an entry of its parent, which a power loss can take along with the files
 * in it, unless the parent is fsynced too.
 */
async function mkdirDurably(dir: string): Promise<void> {
  const made = await mkdir(dir, { recursive: true, mode: 0o700 });
  if (made === undefined) return;
  for (let d = dir; ; d = dirname(d)) {
    await fsyncDir(dirname(d));
    if (d === made || dirname(d) === d) return;
  }
}

/**
 * Writes the lines of `chunks` to `path` durably, a chunk at a time: temp file, fsync, rename, fsync
 * of the directory; returns the lines written. The file is its owner's only (0600, directories made
 * 0700): records carry business data, whatever the umask.
 */
export async function writeDurably(
  path: string,
  chunks: Iterable<readonly string[]> | AsyncIterable<readonly string[]>,
): Promise<number> {
  await mkdirDurably(dirname(path));
  // A temporary name of its own: two writers of one file (a retry beside a slow first attempt of
  // the same window) each rename a complete file into place, never one the other is writing.
  const part = `${path}.${process.pid}-${randomBytes(4).toString('hex')}.part`;
  const handle = await open(part, 'wx', 0o600);
  let lines = 0;
  try {
    try {
      for await (const chunk of chunks) {
        if (chunk.length > 0) await handle.write(chunk.map((l) => `${l}\n`).join(''));
        lines += chunk.length;
      }
      await handle.sync();
    } finally {
      await handle.close();
    }
    // A failed rename (the name taken by a directory) leaves no copy of the records behind either.
    await rename(part, path);
  } catch (e) {
    await unlink(part).catch(() => undefined);
    throw e;
  }
  await fsyncDir(dirname(path));
  return lines;
}

/** The error of a state directory housekeeping cannot write: it names the setting and the path. */
const notWritable = (dir: string, e: unknown, kept: string): Error =>
  new Error(
    `housekeeping: cannot write quarantine exports to ${dir} under the state directory (TIDEMARK_STATE_DIR, housekeeping.stateDir): ${
      e instanceof Error ? e.message : String(e)
    }; quarantine is exported there before it is removed, so ${kept}`,
    { cause: e },
  );

/**
 * Fails unless `dir` can be created and written (a file made and removed): checked before a
 * window deletes anything, so a window with an unwritable state directory removes nothing.
 */
export async function ensureWritable(dir: string): Promise<void> {
  try {
    await mkdirDurably(dir);
    const probe = join(dir, `.probe-${process.pid}-${randomBytes(4).toString('hex')}`);
    await (await open(probe, 'wx', 0o600)).close();
    await unlink(probe);
  } catch (e) {
    throw notWritable(dir, e, 'this window deleted nothing');
  }
}

/** Exports rows (ordered by id) grouped per job, named by `window`'s key; returns the files written. */
export async function exportQuarantine(
  dir: string,
  window: string,
  rows: readonly QuarantineRow[],
): Promise<string[]> {
  const byJob = new Map<string, QuarantineRow[]>();
  // Appended in place: a copy of the job's list per row was quadratic (134 s, all on the event
  // loop, for a batch of 100,000: longer than the heartbeat timeout).
  for (const r of rows) {
    const list = byJob.get(r.job);
    if (list) list.push(r);
    else byJob.set(r.job, [r]);
  }
  const files: string[] = [];
  for (const [job, list] of byJob) {
    const path = exportPath(dir, job, window, list);
    try {
      await writeDurably(path, [list.map(toLine)]);
    } catch (e) {
      throw notWritable(dir, e, 'these records were not removed');
    }
    files.push(path);
  }
  return files;
}

/** Rows per page of an on-demand export: one page is held in memory at a time. */
export const QUARANTINE_PAGE = 1_000;

/**
 * A job's quarantined records created before `before`, in id order, one keyset page at a time.
 * Ordered by `quarantine.id`, the bigint: a bare `id` is the text column of the select list,
 * whose order ('1899' < '19') made each page's last id skip rows. Every page reads one snapshot
 * (a read-only repeatable-read transaction): read each in its own, a window's records committed
 * while the pages are read were half in the export (those past the page being read).
 */
export async function* quarantinePages(
  db: Kysely<Database>,
  job: string,
  before: Date,
  pageSize = QUARANTINE_PAGE,
): AsyncGenerator<QuarantineRow[]> {
  const trx = await db
    .startTransaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute();
  try {
    for (let after = '0'; ;) {
      const { rows } = await sql<QuarantineRow>`select ${QUARANTINE_COLUMNS} from ${ledger(db).quarantine}
        where job = ${job} and created_at < ${before} and quarantine.id > ${after}::bigint
        order by quarantine.id limit ${pageSize}`.execute(trx);
      if (rows.length === 0) return;
      yield rows;
      after = rows[rows.length - 1]!.id;
    }
  } finally {
    // Read only: nothing to keep. Also when the reader stops early (its loop's error, a break).
    await trx.rollback().execute();
  }
}
