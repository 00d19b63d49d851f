// A TypeScript script run as a child process with tsx: ready when it prints READY, its output kept,
// stopped by signal. The test workers and the bench's kill-test workers all start this way.
import './no-user-temporal-config.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface ReadyProcess {
  child: ChildProcess;
  output: () => string;
  /** Sends the signal (unless it has exited) and waits for the exit. */
  stop(signal: NodeJS.Signals): Promise<void>;
}

export async function spawnReady(
  script: string,
  env: Record<string, string>,
  name: string,
): Promise<ReadyProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start:\n${out}`)), 60_000);
    const check = () => {
      if (!out.includes('READY')) return;
      clearTimeout(timer);
      child.stdout!.off('data', check);
      resolve();
    };
    child.stdout!.on('data', check);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${out}`));
    });
  });
  return {
    child,
    output: () => out,
    async stop(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** Runs a command of the project (`npm run worker`, the CLI) from its root to the end: exit code and output. */
export async function runToEnd(
  command: string,
  args: readonly string[],
  env: Record<string, string>,
): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(command, args, {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('close', (c) => r(c)));
  return { code, out, err };
}
