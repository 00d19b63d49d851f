// Temp dirs of the chaos harness's servers, each marked with the pid of the process that made
// it, so a later run can clean up after a run that crashed (a SIGKILLed test leaves its
// PostgreSQL and Temporal server running): dirs whose maker is dead are handed to a cleanup.
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const MARK = 'owner.json';

/** Whether a process with this pid exists (any owner). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A new temp dir `<tmp>/<prefix>XXXXXX`, marked as this process's, with `extra` kept in the mark. */
export function ownedTempDir(prefix: string, extra: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  mark(dir, extra);
  return dir;
}

/** Rewrites a dir's mark (e.g. with the pid of the server it now runs). */
export function mark(dir: string, extra: Record<string, unknown>): void {
  writeFileSync(join(dir, MARK), JSON.stringify({ ...extra, owner: process.pid }));
}

/** Runs `cleanup` on every `<tmp>/<prefix>*` dir whose maker is gone (and on unmarked ones a minute old). */
export async function sweepLeftovers(
  prefix: string,
  cleanup: (dir: string, mark: Record<string, unknown>) => Promise<void>,
): Promise<void> {
  for (const name of readdirSync(tmpdir()).filter((n) => n.startsWith(prefix))) {
    const dir = join(tmpdir(), name);
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(readFileSync(join(dir, MARK), 'utf8')) as Record<string, unknown>;
    } catch {
      // Unmarked: being made right now by another process, or its maker died before marking it.
      if (Date.now() - statSync(dir).mtimeMs < 60_000) continue;
      data = {};
    }
    if (typeof data.owner === 'number' && alive(data.owner)) continue;
    await cleanup(dir, data).catch((err: Error) =>
      console.warn(`Could not clean up the leftover chaos server dir ${dir}: ${err.message}`),
    );
  }
}
