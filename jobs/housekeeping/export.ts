// Quarantine rows written out before they are removed: one JSON Lines file per job and id range,
// written to a temporary file, fsynced and renamed into place (and its directory fsynced) before
// the delete commits. A rerun after a crash between the two writes the same file again.
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export interface QuarantineRow {
  readonly id: string;
  readonly job: string;
  readonly window_start: Date;
  readonly generation: number;
  readonly record_key: string;
  readonly reason: string;
  readonly payload: unknown;
  readonly created_at: Date;
}

const pad = (id: string): string => id.padStart(20, '0');

/** `<dir>/<job>/<first id>-<last id>.jsonl`: ids zero-padded, so the names sort in id order. */
export const exportPath = (dir: string, job: string, rows: readonly QuarantineRow[]): string =>
  join(dir, job, `${pad(rows[0]!.id)}-${pad(rows[rows.length - 1]!.id)}.jsonl`);

export const toLine = (r: QuarantineRow): string =>
  JSON.stringify({
    id: r.id,
    job: r.job,
    window_start: r.window_start.toISOString(),
    generation: r.generation,
    record_key: r.record_key,
    reason: r.reason,
    payload: r.payload,
    created_at: r.created_at.toISOString(),
  });

async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Writes `lines` to `path` durably: temp file, fsync, rename, fsync of the directory. The file is
 * its owner's only (0600, directories made 0700): records carry business data, whatever the umask.
 */
export async function writeDurably(path: string, lines: readonly string[]): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  // A temporary name of its own: two writers of one file (two catch-up windows, a retry beside a
  // slow first attempt) each rename a complete file into place, never one the other is writing.
  const part = `${path}.${process.pid}-${randomBytes(4).toString('hex')}.part`;
  const handle = await open(part, 'wx', 0o600);
  try {
    await handle.writeFile(lines.map((l) => `${l}\n`).join(''));
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(part, path);
  await fsyncDir(dirname(path));
}

/** Exports rows (ordered by id) grouped per job; returns the files written. */
export async function exportQuarantine(dir: string, rows: readonly QuarantineRow[]): Promise<string[]> {
  const byJob = new Map<string, QuarantineRow[]>();
  for (const r of rows) byJob.set(r.job, [...(byJob.get(r.job) ?? []), r]);
  const files: string[] = [];
  for (const [job, list] of byJob) {
    const path = exportPath(dir, job, list);
    await writeDurably(path, list.map(toLine));
    files.push(path);
  }
  return files;
}
