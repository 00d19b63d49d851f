// Latency and memory figures for `npm run bench`:
//  - tick fire -> window done, p50 and p99, with a real Temporal Schedule on a 1-minute grid (the
//    job's own schedule as the sync creates it), against a bare schedule starting a trivial
//    workflow on the same grid in the same minutes (Temporal's own fire -> done);
//  - the worker's resident memory: the bench runs the worker in its own process, so this is the
//    RSS of that process (worker, its workflow cache and the bench's own state; the Temporal dev
//    server runs in a process of its own and is not counted).
import { fileURLToPath } from 'node:url';
import type { Client } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { sql } from 'kysely';
import { memoryLogger } from '../activities/logger.js';
import { demo } from '../jobs/demo-schema.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import { defineCatalog } from '../schedules/define.js';
import { desiredSchedule } from '../workers/schedule-sync.js';
import { createTestDb } from '../test/helpers/db.js';
import { createWorker } from '../workers/create-worker.js';
import type { TickResult } from '../contract/workflows.js';
import { benchServer, log, sizeFrom, type Figure } from './figures.js';

export interface LatencyOptions {
  env: TestWorkflowEnvironment;
  /** Windows to measure, spread over `jobs` jobs (each its own schedule; a window a minute each). */
  windows: number;
  /** Jobs on the 1-minute grid side by side, their ticks 5 s apart within the minute (default: windows / 3). */
  jobs?: number;
  /** Orders landed per window (the sales summary reads them). */
  ordersPerWindow?: number;
  /** A bundle of bench/workflows.ts (tidemark's workflows plus `trivial`); built when absent. */
  bundle?: WorkflowBundle;
  log?: (line: string) => void;
}

const JOB = 'latency';
const MINUTE = 60_000;
/** Job i's window closes at the minute and is ticked 2 + 5i s later (its lateness): at most 10 jobs. */
const latenessOf = (i: number) => `${2 + 5 * i}s`;
const MAX_JOBS = 10;
/** The bare schedule fires after every job's tick, so none share a second. */
const BARE_OFFSET_MS = 55_000;
const BARE_SCHEDULE = 'bench-latency-bare';

/** Nearest-rank percentile: over 30 samples p99 is the slowest one. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

export function benchBundle(): Promise<WorkflowBundle> {
  return bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
}

/**
 * Fire -> done of each schedule-triggered window of the latency job: from the tick workflow's start
 * (the schedule's action) to the window's `finished_at` in the ledger (stamped in its commit).
 */
async function tickSamples(
  client: Client,
  db: Awaited<ReturnType<typeof createTestDb>>['db'],
  jobs: readonly string[],
) {
  const samples: number[] = [];
  const ofJobs = jobs.map((j) => `TidemarkJob = '${j}'`).join(' OR ');
  for await (const wf of client.workflow.list({
    query: `WorkflowType = 'tick' AND (${ofJobs}) AND ExecutionStatus = 'Completed'`,
  })) {
    const tick = (await client.workflow.getHandle(wf.workflowId, wf.runId).result()) as TickResult;
    for (const key of tick.started) {
      const row = await db
        .selectFrom('job_windows')
        .select('finished_at')
        .where('window_key', '=', key)
        .where('status', '=', 'done')
        .executeTakeFirst();
      if (row?.finished_at) samples.push(new Date(row.finished_at).getTime() - wf.startTime.getTime());
    }
  }
  return samples;
}

/** Fire -> done of the bare schedule's trivial workflows: start to close, as the server recorded them. */
async function bareSamples(client: Client): Promise<number[]> {
  const samples: number[] = [];
  for await (const wf of client.workflow.list({
    query: `WorkflowType = 'trivial' AND WorkflowId STARTS_WITH '${BARE_SCHEDULE}' AND ExecutionStatus = 'Completed'`,
  })) {
    if (wf.closeTime) samples.push(wf.closeTime.getTime() - wf.startTime.getTime());
  }
  return samples;
}

/**
 * Runs the latency job's real schedule (as `tidemark schedules sync` creates it: every minute at
 * +5 s, the window's lateness) until `windows` windows are done, with a worker built as production
 * builds one. Takes about `windows` + 1 minutes. Returns p50 and p99 against the bare schedule's.
 */
export async function tickLatency(opts: LatencyOptions): Promise<Figure[]> {
  const log = opts.log ?? (() => undefined);
  const { env } = opts;
  const client = env.client;
  const t = await createTestDb();
  const taskQueue = 'bench-latency';
  const count = Math.min(MAX_JOBS, Math.max(1, opts.jobs ?? Math.ceil(opts.windows / 3)));
  const names = Array.from({ length: count }, (_, i) => `${JOB}-${i}`);
  const catalog = defineCatalog(
    names.map((name, i) => ({ name, grid: '1m', lateness: latenessOf(i), handler: summariseWindow })),
  );
  const perWindow = opts.ordersPerWindow ?? 1_000;
  const from = Math.floor(Date.now() / MINUTE) * MINUTE - MINUTE;
  const minutes = Math.ceil(opts.windows / count) + 3;
  // Orders for every window the run may see, spread evenly over each minute.
  await sql`insert into ${demo.orders} (order_key, placed_at, amount)
    select 'lat' || n, to_timestamp(${from / 1000} + n * (60.0 / ${perWindow})), (n % 997) / 10.0 + 1
      from generate_series(0, ${minutes * perWindow - 1}) n`.execute(t.db);
  const worker = await createWorker({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    deps: { db: t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    bundle: opts.bundle ?? (await benchBundle()),
  });
  const schedules = names.map((name) => desiredSchedule(catalog.get(name), taskQueue));
  try {
    await worker.runUntil(async () => {
      for (const schedule of schedules) await client.schedule.create(schedule);
      await client.schedule.create({
        scheduleId: BARE_SCHEDULE,
        spec: { intervals: [{ every: MINUTE, offset: BARE_OFFSET_MS }] },
        action: { type: 'startWorkflow', workflowType: 'trivial', taskQueue, workflowId: BARE_SCHEDULE },
      });
      log(
        `latency: ${opts.windows} windows of ${count} jobs on a 1-minute grid (about ${Math.ceil(opts.windows / count) + 1} minutes)`,
      );
      const deadline = Date.now() + minutes * MINUTE;
      for (;;) {
        const done = await t.db
          .selectFrom('job_windows')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('job', 'in', names)
          .where('status', '=', 'done')
          .where('trigger', '=', 'schedule')
          .executeTakeFirstOrThrow();
        if (Number(done.n) >= opts.windows) break;
        if (Date.now() > deadline)
          throw new Error(`latency: ${done.n} of ${opts.windows} windows done in time`);
        await new Promise((r) => setTimeout(r, 1_000));
      }
      await Promise.all(
        [...schedules.map((x) => x.scheduleId), BARE_SCHEDULE].map((id) =>
          client.schedule.getHandle(id).delete(),
        ),
      );
    });
    // Visibility is eventually consistent: wait until every tick and bare run is listed.
    let tick: number[] = [];
    let bare: number[] = [];
    for (let tries = 0; tries < 20; tries++) {
      [tick, bare] = await Promise.all([tickSamples(client, t.db, names), bareSamples(client)]);
      if (tick.length >= opts.windows && bare.length >= Math.min(opts.windows, 1)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    log(`latency: ${tick.length} windows, ${bare.length} bare runs`);
    const figure = (p: number): Figure[] => {
      const ours = percentile(tick, p);
      const theirs = percentile(bare, p);
      return [
        {
          name: `latency.bare_schedule_p${p}_ms`,
          value: Math.round(theirs),
          unit: 'ms',
          baseline: null,
          ratio: null,
        },
        {
          name: `latency.tick_to_done_p${p}_ms`,
          value: Math.round(ours),
          unit: 'ms',
          baseline: `latency.bare_schedule_p${p}_ms`,
          ratio: ours / theirs,
        },
      ];
    };
    return [...figure(50), ...figure(99)];
  } finally {
    await t.drop();
  }
}

/** Resident set size of this process, in MiB. */
export function rssMb(): number {
  return process.memoryUsage().rss / (1024 * 1024);
}

/**
 * The worker's RSS after a run (the bench's process: the worker runs in it), against the RSS
 * measured before the run when given (the ratio is then the growth).
 */
export function workerRss(beforeMb?: number): Figure[] {
  const now = rssMb();
  return [
    ...(beforeMb === undefined
      ? []
      : [
          {
            name: 'worker.rss_before_mb',
            value: Math.round(beforeMb),
            unit: 'MiB',
            baseline: null,
            ratio: null,
          },
        ]),
    {
      name: 'worker.rss_mb',
      value: Math.round(now),
      unit: 'MiB',
      baseline: beforeMb === undefined ? null : 'worker.rss_before_mb',
      ratio: beforeMb === undefined ? null : now / beforeMb,
    },
  ];
}

/** The latency section of `npm run bench`: 30 windows of 10 jobs (BENCH_LATENCY_WINDOWS), on a Temporal dev server of its own. */
export async function latencyFigures(): Promise<Figure[]> {
  const windows = sizeFrom('BENCH_LATENCY_WINDOWS', 30, 2);
  const env = await benchServer();
  try {
    return await tickLatency({ env, windows, log });
  } finally {
    await env.teardown();
  }
}
