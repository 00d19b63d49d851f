// The batched backfill measured alone (issue 10, item 3): the bench's backfill job (the sales summary,
// hourly, as bench/run.ts runs it) over BENCH_BACKFILL windows with `batch`, on a fresh Temporal dev
// server and a scratch database. Prints seconds, windows/s and the worker's RSS, and checks the ledger:
// one processed run per window. Sizes: BENCH_BACKFILL (8,760), BENCH_BATCH (200),
// BENCH_CONCURRENCY (8), BENCH_ORDERS_PER_WINDOW (0, as bench/run.ts), BENCH_POOL (20).
// Run: npx tsx bench/backfill-batched.ts
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { sql } from 'kysely';
import { createActivities } from '../activities/index.js';
import { memoryLogger } from '../activities/logger.js';
import { createDb } from '../db/database.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import { defineCatalog } from '../schedules/job.js';
import { isoUtc } from '../schedules/windows.js';
import { findTemporalCli } from '../scripts/temporal-cli.js';
import { createTestDb } from '../test/helpers/db.js';
import { installRuntime } from '../workers/runtime.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import type { BackfillResult } from '../workflows/types.js';

const N = Number(process.env.BENCH_BACKFILL ?? 8_760);
const BATCH = Number(process.env.BENCH_BATCH ?? 200);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);
const PER_WINDOW = Number(process.env.BENCH_ORDERS_PER_WINDOW ?? 0);
const POOL = Number(process.env.BENCH_POOL ?? 20);
const HOUR = 3_600_000;
const T0 = Date.parse('2025-01-01T00:00:00Z');
const log = (line: string) => console.log(`[bench] ${line}`);

installRuntime('WARN');
const t = await createTestDb();
const db = createDb(t.url, { max: POOL });
const env = await TestWorkflowEnvironment.createLocal({
  server: {
    executable: { type: 'existing-path', path: findTemporalCli({ install: true }) },
    log: { format: 'pretty', level: 'error' },
  },
});
try {
  await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
  if (PER_WINDOW > 0) {
    log(`loading ${N * PER_WINDOW} orders`);
    await sql`insert into orders (order_key, placed_at, amount)
      select 'o-' || i, ${new Date(T0)}::timestamptz + (i * (3600.0 / ${PER_WINDOW})) * interval '1 second',
             (i % 200) + 5
        from generate_series(0, ${N * PER_WINDOW - 1}) i`.execute(db);
  }
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
    activities: createActivities({ db, catalog, logger: memoryLogger(), now: () => new Date() }),
    maxConcurrentActivityTaskExecutions: 100,
  });
  await worker.runUntil(async () => {
    log(`batched backfill: ${N} hourly windows, ${BATCH} per batch, ${CONCURRENCY} batches at once`);
    const started = performance.now();
    const result = (await env.client.workflow.execute('backfill', {
      taskQueue: 'bench',
      workflowId: 'bf-batched',
      args: [
        {
          job: 'bf',
          from: isoUtc(new Date(T0)),
          to: isoUtc(new Date(T0 + N * HOUR)),
          concurrency: CONCURRENCY,
          batch: BATCH,
        },
      ],
    })) as BackfillResult;
    const seconds = (performance.now() - started) / 1000;
    if (result.processed !== N) throw new Error(`processed ${result.processed}, expected ${N}`);
    const runs = await sql<{ windows: number; processed: number }>`
      select count(distinct window_start)::int as windows, count(*)::int as processed
        from job_runs where job = 'bf' and kind = 'window' and outcome = 'processed'`.execute(db);
    const { windows, processed } = runs.rows[0]!;
    if (windows !== N || processed !== N)
      throw new Error(`ledger: ${processed} processed runs over ${windows} windows`);
    const rssMb = Math.round(process.memoryUsage().rss / 1e6);
    log(`${N} windows in ${seconds.toFixed(1)} s: ${(N / seconds).toFixed(0)} windows/s; RSS ${rssMb} MB`);
    console.log(
      JSON.stringify({
        name: `backfill.batched_seconds@${N}`,
        value: Number(seconds.toFixed(2)),
        unit: 's',
        batch: BATCH,
        concurrency: CONCURRENCY,
        ordersPerWindow: PER_WINDOW,
        rssMb,
      }),
    );
  });
} finally {
  await env.teardown();
  await db.destroy();
  await t.drop();
}
