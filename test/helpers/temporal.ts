// A real Temporal dev server (the CLI's start-dev) per test file, and workers on it.
import './no-user-temporal-config.js';
import { randomBytes } from 'node:crypto';
import { basename } from 'node:path';
import { after, before } from 'node:test';
import type { Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, type Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { ActivityDeps } from '../../activities/index.js';
import { findTemporalCli } from '../../bin/temporal-cli.js';
import { bundleWorkflows, createWorker } from '../../workers/create-worker.js';
import { ensureSearchAttributes } from '../../workers/search-attributes.js';
import type { ActivityPolicy, TickResult, WindowResult } from '../../contract/workflows.js';
import { createTestDb, type TestDb } from './db.js';
import { SHARED_TEMPORAL } from './shared-temporal.js';
import { windowPolicy } from './windows.js';

// Quiet SDK logs in tests: only warnings and errors.
Runtime.install({ logger: new DefaultLogger('WARN') });

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;
export const sharedBundle = (): Promise<WorkflowBundleWithSourceMap> => (bundle ??= bundleWorkflows());

/**
 * A Temporal server for a test file: a namespace of its own on the tier's shared dev server when
 * the runner started one (test/helpers/shared-temporal.ts), else a dev server of its own. `own`
 * asks for a server of its own always: for a file that stops or reconfigures the server, or
 * hands its address to processes that do not take the namespace from TEMPORAL_NAMESPACE.
 */
export async function startTemporal(opts: { own?: boolean } = {}): Promise<TestWorkflowEnvironment> {
  const shared = process.env[SHARED_TEMPORAL];
  if (shared && !opts.own) return await sharedNamespace(shared);
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTemporalCli() },
      log: { format: 'pretty', level: 'error' },
    },
  });
  await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
  return env;
}

/**
 * A new namespace on the shared server, named after the test file. It becomes the process's
 * TEMPORAL_NAMESPACE too, so the product's own clients (loadConfig) and the processes a test
 * spawns with this environment work in it.
 */
async function sharedNamespace(address: string): Promise<TestWorkflowEnvironment> {
  const file = basename(process.argv[1] ?? 'test').replace(/\.test\.[cm]?[jt]s$/, '');
  const namespace = `${file.replace(/[^a-z0-9-]/gi, '-')}-${randomBytes(3).toString('hex')}`;
  const env = await TestWorkflowEnvironment.createFromExistingServer({ address, namespace });
  await env.connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  await ensureSearchAttributes(env.connection, namespace);
  process.env.TEMPORAL_NAMESPACE = namespace;
  return env;
}

export const uniqueQueue = (name: string): string => `${name}-${randomBytes(4).toString('hex')}`;

export async function startWorker(
  env: TestWorkflowEnvironment,
  taskQueue: string,
  deps: ActivityDeps,
): Promise<{ worker: Worker; running: Promise<void> }> {
  const worker = await createWorker({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    deps,
    bundle: await sharedBundle(),
    shutdownGraceTime: '1s',
  });
  const running = worker.run();
  return { worker, running };
}

/** One tick of `job` at `now`, as its schedule fires it (workflow id `<job>/tick-<now>`). */
export const tickAt = (client: Client, taskQueue: string, job: string, now: string): Promise<TickResult> =>
  client.workflow.execute('tick', {
    taskQueue,
    workflowId: `${job}/tick-${now}`,
    args: [{ job, now }],
  }) as Promise<TickResult>;

/**
 * The window [start, end) of `job` presented by hand, as `tidemark run` does: one attempt within 30 s
 * unless `policy` says otherwise.
 */
export const windowByHand = (
  client: Client,
  taskQueue: string,
  job: string,
  start: string,
  end: string,
  policy: ActivityPolicy = windowPolicy(1, 30_000),
): Promise<WindowResult> =>
  client.workflow.execute('window', {
    taskQueue,
    workflowId: `${job}/${start}`,
    args: [
      {
        job,
        start,
        end,
        generation: 0,
        key: `${job}/${start}`,
        trigger: 'manual',
        policy,
      },
    ],
  }) as Promise<WindowResult>;

// Defined with the other window builders, which need no Temporal; re-exported for the tests that use it here.
export { windowPolicy };

/** Polls `probe` until it returns a value other than undefined, or fails after `ms`. */
export async function eventually<T>(
  probe: () => Promise<T | undefined>,
  ms = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * A test file's real stack: its own Temporal namespace or server (startTemporal) and its own
 * migrated database, started before its tests and torn down after them.
 */
export function realStack(
  setup?: (stack: { env: TestWorkflowEnvironment; t: TestDb }) => Promise<void>,
  opts: { own?: boolean } = {},
): {
  readonly env: TestWorkflowEnvironment;
  readonly t: TestDb;
} {
  const stack = {} as { env: TestWorkflowEnvironment; t: TestDb };
  before(async () => {
    [stack.env, stack.t] = await Promise.all([startTemporal(opts), createTestDb()]);
    // The file's own set-up that needs the stack runs in the same hook, so it always sees it ready.
    await setup?.(stack);
  });
  after(async () => {
    await stack.t?.drop();
    await stack.env?.teardown();
  });
  return stack;
}

/** Runs `fn` with a worker polling `taskQueue`, and shuts it down afterwards. */
export async function withWorker<T>(
  env: TestWorkflowEnvironment,
  taskQueue: string,
  deps: ActivityDeps,
  fn: () => Promise<T>,
): Promise<T> {
  const { worker, running } = await startWorker(env, taskQueue, deps);
  try {
    return await fn();
  } finally {
    worker.shutdown();
    await running;
  }
}
