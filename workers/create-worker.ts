// Builds a worker for the tidemark task queue from its dependencies. Any number of these,
// on any number of hosts, may poll one task queue: they all register the same code.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DataConverter, Duration } from '@temporalio/common';
import {
  bundleWorkflowCode,
  Worker,
  type NativeConnection,
  type WorkflowBundleOption,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities/index.js';
import { payloadKeysFrom, workflowFailureConverterPath } from '../codec/index.js';
import { workerTracing, workflowInterceptorModules } from './tracing.js';
import { MAX_CACHED_WORKFLOWS } from './memory.js';

// workflows/index.ts in the source tree, dist/workflows/index.js in the installed package.
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';
export const workflowsPath = fileURLToPath(new URL(`../workflows/index.${ext}`, import.meta.url));

/**
 * Bundles the workflow code once; reuse the bundle for every worker of a process or test file.
 * `encryptFailures` (default: payload keys are configured in the environment) bundles the failure
 * converter that moves failure messages and stack traces into the encrypted payloads;
 * `interceptors` (default: tracing's, when it is on) the workflow interceptor modules.
 */
export function bundleWorkflows(
  opts: { encryptFailures?: boolean; interceptors?: string[] } = {},
): Promise<WorkflowBundleWithSourceMap> {
  const encryptFailures = opts.encryptFailures ?? payloadKeysFrom(process.env) !== undefined;
  return bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: opts.interceptors ?? workflowInterceptorModules(),
    ...(encryptFailures ? { failureConverterPath: workflowFailureConverterPath } : {}),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
}

/**
 * The bundles `npm run build` makes (workers/build-bundles.ts), with and without the encrypting
 * failure converter, both without tracing: a worker of the installed package loads one instead of
 * bundling at start, which would load webpack's work into its memory for good (~115 MiB).
 */
export const PREBUILT_DIR = fileURLToPath(new URL('../workflow-bundles/', import.meta.url));
export const prebuiltName = (encryptFailures: boolean): string =>
  `${encryptFailures ? 'encrypted' : 'plain'}.js`;

/** The prebuilt bundle for this worker, if there is one: not in the source tree, nor with tracing on. */
function prebuiltBundle(encryptFailures: boolean): { codePath: string } | undefined {
  if (ext !== 'js' || workflowInterceptorModules().length > 0) return undefined;
  const codePath = join(PREBUILT_DIR, prebuiltName(encryptFailures));
  return existsSync(codePath) ? { codePath } : undefined;
}

/**
 * The workflow code for a process's workers (one bundle for all of them): the package's prebuilt
 * bundle when it fits, or bundled now; `from` says which, for the worker's start line.
 */
export async function workflowBundle(): Promise<{ bundle: WorkflowBundleOption; from: string }> {
  const encryptFailures = payloadKeysFrom(process.env) !== undefined;
  const prebuilt = prebuiltBundle(encryptFailures);
  if (prebuilt) return { bundle: prebuilt, from: `${prebuilt.codePath} (built with the package)` };
  return {
    bundle: await bundleWorkflows({ encryptFailures }),
    from: `bundled at start${workflowInterceptorModules().length ? ' (tracing is on)' : ''}`,
  };
}

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  bundle?: WorkflowBundleOption;
  maxConcurrentActivities?: number;
  /** How long in-flight activities may finish after a shutdown request. */
  shutdownGraceTime?: string;
  /**
   * The payload codec and failure converter (codec/index.ts's temporalDataConverter()); a bundle
   * given with it should be made with bundleWorkflows({ encryptFailures: true }).
   */
  dataConverter?: DataConverter;
}

/** One worker per task queue the process polls (the job queue, the watch's); one connection and bundle. */
export async function createWorkers(
  opts: Omit<WorkerOptions, 'taskQueue'> & { taskQueues: readonly string[] },
): Promise<Worker[]> {
  const { taskQueues, ...rest } = opts;
  return await Promise.all(taskQueues.map((taskQueue) => createWorker({ ...rest, taskQueue })));
}

/** Runs the workers until all stop; when one fails, the others are shut down and its error is thrown. */
export async function runWorkers(workers: readonly Worker[]): Promise<void> {
  const stopOthers = (err: unknown) => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    throw err;
  };
  await Promise.all(workers.map((w) => w.run().catch(stopOthers)));
}

export async function createWorker(opts: WorkerOptions): Promise<Worker> {
  // The bundle built with the package, if it fits; otherwise with encrypted failures, workflow code
  // is bundled here (the SDK's own bundling would take the client side's CommonJS failure
  // converter, which webpack does not read).
  const encryptFailures = !!opts.dataConverter?.failureConverterPath;
  const bundle =
    opts.bundle ??
    prebuiltBundle(encryptFailures) ??
    (encryptFailures ? await bundleWorkflows({ encryptFailures: true }) : undefined);
  return await Worker.create({
    connection: opts.connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    ...(bundle ? { workflowBundle: bundle } : { workflowsPath }),
    ...workerTracing({ bundlesItself: !bundle }),
    ...(opts.dataConverter ? { dataConverter: opts.dataConverter } : {}),
    activities: createActivities(opts.deps),
    maxConcurrentActivityTaskExecutions: opts.maxConcurrentActivities ?? 50,
    maxCachedWorkflows: MAX_CACHED_WORKFLOWS,
    shutdownGraceTime: (opts.shutdownGraceTime ?? '10s') as Duration,
    // A workflow task waits this long on a dead worker's sticky queue before any worker may take
    // it (the default, 10 s, added that much to every window a crashed worker held). A live but
    // busy worker past it only costs a replay elsewhere.
    stickyQueueScheduleToStartTimeout: '3s',
  });
}
