// Orchestration: a backfill of BENCH_BACKFILL hourly windows (the sales summary against
// PostgreSQL, a window child workflow each), against trivial child workflows run by a parent
// with the same concurrency (the bare Temporal ceiling), on one Temporal dev server.
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { memoryLogger } from '../activities/logger.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import { defineCatalog } from '../schedules/job.js';
import { isoUtc } from '../schedules/windows.js';
import { findTemporalCli } from '../scripts/temporal-cli.js';
import { createTestDb } from '../test/helpers/db.js';
import { installRuntime } from '../workers/runtime.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import type { BackfillResult } from '../workflows/types.js';
import { figure, log, seconds, sizeFrom, type Figure } from './figures.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2025-01-01T00:00:00Z');

export async function backfillFigures(): Promise<Figure[]> {
  const windows = sizeFrom('BENCH_BACKFILL', 8_760, 240);
  const concurrency = sizeFrom('BENCH_CONCURRENCY', 32, 32);
  installRuntime('WARN');
  const t = await createTestDb();
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTemporalCli({ install: true }) },
      log: { format: 'pretty', level: 'error' },
    },
  });
  try {
    await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
    const bundle = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
      logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
    });
    const catalog = defineCatalog([
      { name: 'bf', grid: '1h', start: isoUtc(new Date(T0)), handler: summariseWindow },
    ]);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: 'bench',
      workflowBundle: bundle,
      activities: createActivities({ db: t.db, catalog, logger: memoryLogger(), now: () => new Date() }),
      maxConcurrentActivityTaskExecutions: 100,
    });
    return await worker.runUntil(async () => {
      log(`bare Temporal: ${windows} trivial child workflows, ${concurrency} at once`);
      const bare = await seconds(() =>
        env.client.workflow.execute('bareFanOut', {
          taskQueue: 'bench',
          workflowId: 'bare',
          args: [{ n: windows, concurrency, prefix: 'trivial' }],
        }),
      );
      log(`backfill, a window workflow each: ${windows} hourly windows, ${concurrency} at once`);
      let result: BackfillResult | undefined;
      const perWindow = await seconds(async () => {
        result = (await env.client.workflow.execute('backfill', {
          taskQueue: 'bench',
          workflowId: 'bf',
          args: [
            { job: 'bf', from: isoUtc(new Date(T0)), to: isoUtc(new Date(T0 + windows * HOUR)), concurrency },
          ],
        })) as BackfillResult;
      });
      if (result?.processed !== windows)
        throw new Error(`backfill processed ${result?.processed}, expected ${windows}`);
      const bareFig = figure('backfill.bare_child_workflows', windows / bare, 'workflows/s');
      log(
        `bare ${(windows / bare).toFixed(1)}/s, per-window backfill ${(windows / perWindow).toFixed(1)} windows/s`,
      );
      return [bareFig, figure('backfill.per_window_vs_bare', windows / perWindow, 'windows/s', bareFig)];
    });
  } finally {
    await env.teardown();
    await t.drop();
  }
}
