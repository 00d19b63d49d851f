// Orchestration: a backfill of BENCH_BACKFILL hourly windows (the sales summary against
// PostgreSQL over the peers' orders, 3 a window), a window child workflow each and batched,
// against trivial child workflows run by a parent with the same concurrency (the bare Temporal
// ceiling), on one Temporal dev server; and the worker's memory after them.
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { memoryLogger } from '../activities/logger.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import { defineCatalog } from '../schedules/define.js';
import { isoUtc } from '../contract/window-key.js';
import { createTestDb } from '../test/helpers/db.js';
import { MAX_CACHED_WORKFLOWS } from '../workers/memory.js';
import { installRuntime } from '../workers/runtime.js';
import type { BackfillResult } from '../contract/workflows.js';
import { benchServer, cpuOf, figure, log, seconds, sizeFrom, type Figure } from './figures.js';
// Not ./peers.js: it loads the peers' harnesses (graphile-worker, pg-boss, OpenTelemetry through
// workers/create-worker.ts) that a worker does not, ~12 MiB of this process's resident memory.
import { checkTotals, loadPeerOrders, throughputLayout } from './peers/orders.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2025-01-01T00:00:00Z');

export interface BackfillRates {
  figures: Figure[];
  /** windows/s, for the comparison with the peers on the same orders. */
  perWindow: number;
  batched: number;
  windows: number;
}

/** The real workflows and the bench's own (bench/workflows.ts) in one bundle. */
export const benchBundle = () =>
  bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });

export async function backfillFigures(): Promise<BackfillRates> {
  const windows = sizeFrom('BENCH_BACKFILL', 8_760, 240);
  const concurrency = sizeFrom('BENCH_CONCURRENCY', 32, 32);
  const batch = sizeFrom('BENCH_BATCH', 200, 60);
  const batches = sizeFrom('BENCH_BATCH_CONCURRENCY', 8, 4);
  installRuntime('WARN');
  const t = await createTestDb();
  const env = await benchServer();
  try {
    await loadPeerOrders(t.db, throughputLayout(windows));
    // Built ahead (bench/backfill-process.ts), as the package's workers load theirs, or here.
    const prebuilt = process.env.BENCH_WORKFLOW_BUNDLE;
    const bundle = prebuilt ? { codePath: prebuilt } : await benchBundle();
    const catalog = defineCatalog(
      ['bf', 'bf-batched'].map((name) => ({
        name,
        grid: '1h',
        start: isoUtc(new Date(T0)),
        handler: summariseWindow,
      })),
    );
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: 'bench',
      workflowBundle: bundle,
      activities: createActivities({ db: t.db, catalog, logger: memoryLogger(), now: () => new Date() }),
      maxConcurrentActivityTaskExecutions: 100,
      maxCachedWorkflows: MAX_CACHED_WORKFLOWS,
    });
    // The worker before any window: modules loaded, the bundle built, connections open.
    const startRssMb = process.memoryUsage().rss / 2 ** 20;
    return await worker.runUntil(async () => {
      log(`bare Temporal: ${windows} trivial child workflows, ${concurrency} at once`);
      let bare = 0;
      const bareCpu = await cpuOf(
        async () =>
          (bare = await seconds(() =>
            env.client.workflow.execute('bareFanOut', {
              taskQueue: 'bench',
              workflowId: 'bare',
              args: [{ n: windows, concurrency, prefix: 'trivial' }],
            }),
          )),
      );
      log(`backfill, a window workflow each: ${windows} hourly windows, ${concurrency} at once`);
      let result: BackfillResult | undefined;
      let perWindow = 0;
      const perWindowCpu = await cpuOf(
        async () =>
          (perWindow = await seconds(async () => {
            result = (await env.client.workflow.execute('backfill', {
              taskQueue: 'bench',
              workflowId: 'bf',
              args: [
                {
                  job: 'bf',
                  from: isoUtc(new Date(T0)),
                  to: isoUtc(new Date(T0 + windows * HOUR)),
                  concurrency,
                },
              ],
            })) as BackfillResult;
          })),
      );
      if (result?.processed !== windows)
        throw new Error(`backfill processed ${result?.processed}, expected ${windows}`);
      log(`batched backfill: ${windows} hourly windows, ${batch} a batch, ${batches} batches at once`);
      const batched = await seconds(async () => {
        result = (await env.client.workflow.execute('backfill', {
          taskQueue: 'bench',
          workflowId: 'bf-batched',
          args: [
            {
              job: 'bf-batched',
              from: isoUtc(new Date(T0)),
              to: isoUtc(new Date(T0 + windows * HOUR)),
              concurrency: batches,
              batch,
            },
          ],
        })) as BackfillResult;
      });
      if (result?.processed !== windows)
        throw new Error(`batched backfill processed ${result?.processed}, expected ${windows}`);
      for (const job of ['bf', 'bf-batched']) await checkTotals(t.db, job, throughputLayout(windows));
      const memory = process.memoryUsage();
      const rssMb = memory.rss / 2 ** 20;
      const startFig = figure('worker.rss_start_mb', startRssMb, 'MiB');
      const bareFig = figure('backfill.bare_child_workflows', windows / bare, 'workflows/s');
      const perWindowFig = figure('backfill.per_window_seconds', perWindow, 's');
      // CPU per window: the machine (2 cores) is what bounds both rates.
      const bareCpuFig = figure('backfill.bare_cpu_ms', bareCpu.machineMs / windows, 'ms');
      const bareWorkerFig = figure('backfill.bare_worker_cpu_ms', bareCpu.processMs / windows, 'ms');
      log(
        `bare ${(windows / bare).toFixed(1)}/s, per window ${(windows / perWindow).toFixed(1)}/s, ` +
          `batched ${batched.toFixed(1)} s (${(windows / batched).toFixed(0)}/s), RSS ${rssMb.toFixed(0)} MiB`,
      );
      return {
        windows,
        perWindow: windows / perWindow,
        batched: windows / batched,
        figures: [
          bareFig,
          figure('backfill.per_window_vs_bare', windows / perWindow, 'windows/s', bareFig),
          perWindowFig,
          figure(`backfill.batched_seconds@${windows}`, batched, 's', perWindowFig),
          bareCpuFig,
          figure('backfill.per_window_cpu_ms', perWindowCpu.machineMs / windows, 'ms', bareCpuFig),
          bareWorkerFig,
          figure('backfill.per_window_worker_cpu_ms', perWindowCpu.processMs / windows, 'ms', bareWorkerFig),
          // This process is the worker (workflows and activities in-process), run with the worker's
          // flags (bench/backfill-process.ts): after both backfills, against itself before them.
          startFig,
          figure('worker.rss_mb', rssMb, 'MiB', startFig),
          figure('worker.heap_used_mb', memory.heapUsed / 2 ** 20, 'MiB'),
          figure('worker.heap_total_mb', memory.heapTotal / 2 ** 20, 'MiB'),
        ],
      };
    });
  } finally {
    await env.teardown();
    await t.drop();
  }
}
