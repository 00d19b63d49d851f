// Worker processes for race tests: spawned, waited for, their output kept, killed at the end.
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnReady } from './spawn.js';
import { sharedBundle } from './temporal.js';

const script = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

export interface WorkerProcess {
  name: string;
  child: ChildProcess;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * The environment of a worker process (worker-process.ts) on `taskQueue` against the file's stack,
 * running `testJob` (its TEST_JOB: name, grid, start, holdMs, and the test's faults).
 */
export const workerProcessEnv = (
  stack: {
    readonly env: { readonly address: string; readonly namespace?: string };
    readonly t: { readonly url: string };
  },
  taskQueue: string,
  testJob: Record<string, unknown>,
): Record<string, string> => ({
  DATABASE_URL: stack.t.url,
  TEMPORAL_ADDRESS: stack.env.address,
  TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
  TIDEMARK_TASK_QUEUE: taskQueue,
  TEST_JOB: JSON.stringify(testJob),
});

let bundlePath: Promise<string> | undefined;
function bundleFile(): Promise<string> {
  return (bundlePath ??= sharedBundle().then(async (b) => {
    const path = join(tmpdir(), `tidemark-bundle-${process.pid}.js`);
    await writeFile(path, b.code);
    // Removed when the test file's process ends (1.8 MB each otherwise left in /tmp).
    process.once('exit', () => rmSync(path, { force: true }));
    return path;
  }));
}

export async function spawnWorker(name: string, env: Record<string, string>): Promise<WorkerProcess> {
  const worker = await spawnReady(
    script,
    { ...env, WORKER_NAME: name, WORKFLOW_BUNDLE: await bundleFile() },
    `worker ${name}`,
  );
  return { name, ...worker, stop: (signal = 'SIGTERM') => worker.stop(signal) };
}
