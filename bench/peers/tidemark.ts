// tidemark in the kill test: its real worker (test/helpers/worker-process.ts: createWorker with
// the sales summary, holding each window's transaction `holdMs`) in a child process, against a
// Temporal dev server, running one window workflow per window (what a tick or a backfill starts
// for each window). A dead worker's activity is retried after its attempt timeout (4 s here).
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { policyOf } from '../../activities/deps.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import { defineJob } from '../../schedules/define.js';
import { isoUtc } from '../../contract/window-key.js';
import { findTemporalCli } from '../../bin/temporal-cli.js';
import { bundleWorkflows } from '../../workers/create-worker.js';
import { ensureSearchAttributes } from '../../workers/search-attributes.js';
import { spawnReady } from '../../test/helpers/spawn.js';
import type { Harness } from './kill.js';
import type { Window } from './orders.js';

const script = fileURLToPath(new URL('../../test/helpers/worker-process.ts', import.meta.url));
export const TIDEMARK_JOB = 'tidemark';
const ATTEMPT_TIMEOUT = '4s';

export async function tidemarkHarness(url: string, windows: Window[], holdMs: number): Promise<Harness> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTemporalCli({ install: true }) },
      log: { format: 'pretty', level: 'error' },
    },
  });
  const bundlePath = join(tmpdir(), `tidemark-peers-${process.pid}-${randomBytes(4).toString('hex')}.js`);
  try {
    await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
    await writeFile(bundlePath, (await bundleWorkflows()).code);
  } catch (err) {
    await env.teardown();
    throw err;
  }
  const taskQueue = `peers-kill-${randomBytes(4).toString('hex')}`;
  const start = isoUtc(windows[0]!.start);
  // The same job as the worker's catalog (worker-process.ts), for the workflows' activity policy.
  const policy = policyOf(
    defineJob({
      name: TIDEMARK_JOB,
      grid: '1h',
      start,
      lateness: '0m',
      attemptTimeout: ATTEMPT_TIMEOUT,
      retry: { maximumAttempts: 5, initialInterval: '100ms', maximumInterval: '1s' },
      effectTimeout: '1m',
      handler: summariseWindow,
    }),
  );
  const keys = windows.map((w) => `${TIDEMARK_JOB}/${isoUtc(w.start)}`);
  await Promise.all(
    windows.map((w, i) =>
      env.client.workflow.start('window', {
        taskQueue,
        workflowId: keys[i]!,
        args: [
          {
            job: TIDEMARK_JOB,
            start: isoUtc(w.start),
            end: isoUtc(w.end),
            generation: 0,
            key: keys[i]!,
            trigger: 'manual',
            policy,
          },
        ],
      }),
    ),
  );
  let n = 0;
  return {
    job: TIDEMARK_JOB,
    recovery: `Temporal retries the dead worker's activity after its ${ATTEMPT_TIMEOUT} attempt timeout; the ledger's done marker decides`,
    spawn: () =>
      spawnReady(
        script,
        {
          DATABASE_URL: url,
          TEMPORAL_ADDRESS: env.address,
          TIDEMARK_TASK_QUEUE: taskQueue,
          WORKER_NAME: `tidemark-${++n}`,
          WORKFLOW_BUNDLE: bundlePath,
          TEST_JOB: JSON.stringify({
            name: TIDEMARK_JOB,
            grid: '1h',
            start,
            holdMs,
            attemptTimeout: ATTEMPT_TIMEOUT,
          }),
        },
        `tidemark worker ${n}`,
      ),
    async pending() {
      const open = await Promise.all(
        keys.map(async (k) => (await env.client.workflow.getHandle(k).describe()).status.name === 'RUNNING'),
      );
      return { pending: open.filter(Boolean).length, locked: 0 };
    },
    afterKill: async () => undefined,
    async lostStates(starts) {
      const out: Record<string, number> = {};
      for (const s of starts) {
        const d = await env.client.workflow.getHandle(`${TIDEMARK_JOB}/${isoUtc(s)}`).describe();
        const state = `workflow ${d.status.name.toLowerCase()}`;
        out[state] = (out[state] ?? 0) + 1;
      }
      return out;
    },
    async close() {
      await env.teardown();
      await rm(bundlePath, { force: true });
    },
  };
}
