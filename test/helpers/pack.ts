// `npm pack` of this checkout for the tests that install the package as a user would. Packing
// rebuilds dist/ (prepack): two test files packing at once would each delete the other's build, so
// one packs at a time (a lock beside the checkout's temporary files), and within one run of the
// suite (TIDEMARK_TEST_RUN, set by the system tier's global set-up) the files share one tarball.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../..', import.meta.url));
const slot = join(tmpdir(), `tidemark-pack-${createHash('sha1').update(repo).digest('hex').slice(0, 10)}`);

export interface Packed {
  readonly tarball: string;
  /** The files the tarball holds, as npm pack listed them. */
  readonly files: readonly string[];
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Holds the checkout's pack lock while `fn` runs; a lock whose holder died is taken over. */
async function locked<T>(fn: () => Promise<T>): Promise<T> {
  const lock = `${slot}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // Empty or gone for a moment while its holder writes or removes it: wait and look again.
      let holder = 0;
      try {
        holder = Number(readFileSync(join(lock, 'pid'), 'utf8'));
      } catch {
        holder = 0;
      }
      if (holder > 0 && !alive(holder)) rmSync(lock, { recursive: true, force: true });
      else await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** This checkout packed, once per suite run (each file alone packs afresh). */
export async function packedTarball(): Promise<Packed> {
  const runId = process.env.TIDEMARK_TEST_RUN ?? `pid-${process.pid}`;
  const dir = join(slot, runId);
  const record = join(dir, 'packed.json');
  return await locked(async () => {
    if (existsSync(record)) return JSON.parse(readFileSync(record, 'utf8')) as Packed;
    // Earlier runs' tarballs go: one run's at a time.
    rmSync(slot, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const packed = await run('npm', ['pack', '--json', '--pack-destination', dir], {
      cwd: repo,
      maxBuffer: 64 * 1024 * 1024,
    });
    const [info] = JSON.parse(packed.stdout) as { filename: string; files: { path: string }[] }[];
    const result: Packed = { tarball: join(dir, info!.filename), files: info!.files.map((f) => f.path) };
    writeFileSync(record, JSON.stringify(result));
    return result;
  });
}
