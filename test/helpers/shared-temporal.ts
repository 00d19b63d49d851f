// One Temporal dev server for the system tier (node --test-global-setup): started once in the
// runner's process, its address handed to every test file through the environment. A test file
// that asks for a stack gets a namespace of its own on it (test/helpers/temporal.ts), so its
// workflow ids, schedules and visibility queries meet no other file's. A runner without global
// set-up (Node.js 22) leaves the variable unset, and each file starts its own server as before.
import './no-user-temporal-config.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { findTemporalCli } from '../../bin/temporal-cli.js';

/** The variable that carries the shared server's address to the test files. */
export const SHARED_TEMPORAL = 'TIDEMARK_TEST_TEMPORAL';

let server: TestWorkflowEnvironment | undefined;

export async function globalSetup(): Promise<void> {
  server = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTemporalCli() },
      log: { format: 'pretty', level: 'error' },
    },
  });
  process.env[SHARED_TEMPORAL] = server.address;
}

export async function globalTeardown(): Promise<void> {
  await server?.teardown();
}
