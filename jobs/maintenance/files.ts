// File maintenance: log rotation (rotate, compress, keep N) and removal of old temporary files.
// Both stay inside their directories: symbolic links are neither followed nor removed.
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, open, readdir, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';

export interface LogRotation {
  dir: string;
  file: string;
  keep: number;
}

/**
 * Rotates `dir/file` to `file.<stamp>.gz` (the stamp names the window, so a second run of the
 * same window finds its rotation done), starts an empty log, and keeps the newest `keep`.
 */
export async function rotateLog(
  task: LogRotation,
  stamp: string,
): Promise<{ rotated: string | null; removed: string[] }> {
  const live = join(task.dir, task.file);
  const target = join(task.dir, `${task.file}.${stamp}.gz`);
  let rotated: string | null = null;
  const exists = async (p: string) =>
    lstat(p).then(
      () => true,
      () => false,
    );
  if (!(await exists(target)) && (await exists(live)) && (await lstat(live)).isFile()) {
    const moving = `${live}.${stamp}`;
    if (!(await exists(moving))) {
      const mode = (await stat(live)).mode;
      await rename(live, moving);
      await writeFile(live, '', { mode });
    }
    // Compress to a temporary name first: a killed run never leaves a truncated .gz behind.
    await pipeline(createReadStream(moving), createGzip(), createWriteStream(`${target}.part`));
    const fh = await open(`${target}.part`, 'r+');
    await fh.sync();
    await fh.close();
    await rename(`${target}.part`, target);
    await unlink(moving);
    rotated = basename(target);
  }
  const prefix = `${task.file}.`;
  const entries = await readdir(task.dir, { withFileTypes: true });
  const archives = entries
    .filter((e) => e.isFile() && e.name.startsWith(prefix) && e.name.endsWith('.gz'))
    .map((e) => e.name)
    .sort()
    .reverse();
  const removed: string[] = [];
  for (const name of archives.slice(task.keep)) {
    await unlink(join(task.dir, name)).then(
      () => removed.push(name),
      () => undefined,
    );
  }
  return { rotated, removed };
}

export interface TempCleanup {
  dir: string;
  maxAgeMs: number;
}

/** Removes regular files older than the age under `dir`, descending into real directories only. */
export async function cleanTemp(
  task: TempCleanup,
  now: Date,
): Promise<{ removed: string[]; skippedLinks: number }> {
  const removed: string[] = [];
  let skippedLinks = 0;
  async function walk(dir: string): Promise<void> {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isSymbolicLink()) {
        skippedLinks++;
        continue;
      }
      if (entry.isDirectory()) {
        await walk(path);
        continue;
      }
      if (!entry.isFile()) continue;
      const info = await lstat(path);
      if (now.getTime() - info.mtimeMs >= task.maxAgeMs) {
        await unlink(path).then(
          () => removed.push(path.slice(task.dir.length + 1)),
          () => undefined,
        );
      }
    }
  }
  await walk(task.dir);
  return { removed: removed.sort(), skippedLinks };
}
