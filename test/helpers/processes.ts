// Worker processes for race tests: spawned, waited for, their output kept, killed at the end.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sharedBundle } from './temporal.js';

const script = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

let bundlePath: Promise<string> | undefined;
function bundleFile(): Promise<string> {
  return (bundlePath ??= sharedBundle().then(async (b) => {
    const path = join(tmpdir(), `tidemark-bundle-${process.pid}.js`);
    await writeFile(path, b.code);
    return path;
  }));
}

export async function spawnWorker(name: string, env: Record<string, string>): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env, WORKER_NAME: name, WORKFLOW_BUNDLE: await bundleFile() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker ${name} did not start:\n${out}`)), 60_000);
    const check = () => {
      if (out.includes('READY')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker ${name} exited with ${code}:\n${out}`));
    });
  });
  return {
    name,
    child,
    output: () => out,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
