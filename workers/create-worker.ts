// Builds a worker for the tidemark task queue from its dependencies. Any number of these,
// on any number of hosts, may poll one task queue: they all register the same code.
import { fileURLToPath } from 'node:url';
import type { DataConverter, Duration } from '@temporalio/common';
import {
  bundleWorkflowCode,
  Worker,
  type NativeConnection,
  type WorkflowBundle,
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
 * converter that moves failure messages and stack traces into the encrypted payloads.
 */
export function bundleWorkflows(
  opts: { encryptFailures?: boolean } = {},
): Promise<WorkflowBundleWithSourceMap> {
  const encryptFailures = opts.encryptFailures ?? payloadKeysFrom(process.env) !== undefined;
  return bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: workflowInterceptorModules(),
    ...(encryptFailures ? { failureConverterPath: workflowFailureConverterPath } : {}),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
}

export interface WorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  deps: ActivityDeps;
  bundle?: WorkflowBundle;
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
  // With encrypted failures, workflow code is bundled here (the SDK's own bundling would take the
  // client side's CommonJS failure converter, which webpack does not read).
  const bundle =
    opts.bundle ??
    (opts.dataConverter?.failureConverterPath ? await bundleWorkflows({ encryptFailures: true }) : undefined);
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
