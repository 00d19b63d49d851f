// The process's Prometheus metrics: window outcomes and durations counted as the activities decide
// them, and gauges read at scrape time from the ledger (lag, effects, open incidents) and from
// Temporal (running backfills' progress, pollers per task queue). The gauges describe the whole deployment, so every
// process that serves them reports the same values: aggregate them with max(), not sum().
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricsSink } from '../activities/metrics.js';
import { windowsBehind } from '../activities/watch.js';
import type { Database } from '../db/schema.js';
import type { Catalog } from '../schedules/job.js';
import { SA_JOB } from '../contract/search-attributes.js';
import type { BackfillProgress } from '../contract/workflows.js';

export interface MetricsOptions {
  db: Kysely<Database>;
  catalog: Catalog;
  /** For running backfills' progress; without it the backfill gauges stay empty. */
  client?: Client;
  now?: () => Date;
  /** Task queues whose pollers are counted (the job queue and the lag watch's): 0 means nobody runs them. */
  taskQueues?: readonly string[];
  /** How long one source may take per scrape before it counts as down. */
  timeoutMs?: number;
  /**
   * How long the gauges' reading serves the scrapes that follow (default 5 s): scraping often, or
   * from several Prometheus replicas, then costs the database and Temporal what one scrape does.
   */
  snapshotMs?: number;
}

export interface Metrics {
  readonly registry: Registry;
  readonly sink: MetricsSink;
}

type Sample = readonly [labels: Record<string, string>, value: number];

/** Running backfills looked at per scrape, at most. */
const MAX_BACKFILLS = 100;
const BACKFILL_STATES = ['processed', 'already_done', 'running_elsewhere', 'failed', 'in_flight'] as const;

async function within<T>(ms: number, what: string, work: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function createMetrics(o: MetricsOptions): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const now = o.now ?? (() => new Date());
  const timeoutMs = o.timeoutMs ?? 5_000;
  collectDefaultMetrics({ register: registry });

  const windows = new Counter({
    name: 'tidemark_windows_total',
    help: 'Window attempts by what the activity decided: processed, skipped (reason already-done or running) or failed (reason: the failure type)',
    labelNames: ['job', 'outcome', 'reason'],
    registers,
  });
  const duration = new Histogram({
    name: 'tidemark_window_duration_seconds',
    help: 'Time a window attempt took in its activity, for attempts that ran it (processed or failed)',
    labelNames: ['job', 'outcome'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
    registers,
  });

  /**
   * One read of every source, shared by the gauges (prom-client collects them at once) and by the
   * scrapes of the next `snapshotMs` (on the process's monotonic clock), a source that was down
   * included (its gauges left out, tidemark_metrics_source_up 0): no reading is older than that.
   */
  const snapshotMs = o.snapshotMs ?? 5_000;
  let last: { at: number; value: Promise<Map<string, Sample[]>>; pending: boolean } | undefined;
  const snapshot = () => {
    const t = performance.now();
    // 0: only the gauges of one scrape share a reading (it is shared while it is being read).
    const fresh = last && (snapshotMs > 0 ? t - last.at < snapshotMs : last.pending);
    if (!fresh) {
      const mine = { at: t, value: readSources(o, now(), timeoutMs), pending: true };
      mine.value.then(
        () => (mine.pending = false),
        () => {
          mine.pending = false;
          if (last === mine) last = undefined;
        },
      );
      last = mine;
    }
    return last!.value;
  };
  const fromSnapshot = (name: string, help: string, labelNames: string[]) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        this.reset();
        for (const [labels, value] of (await snapshot()).get(name) ?? []) this.set(labels, value);
      },
    });
  fromSnapshot(
    'tidemark_metrics_source_up',
    'Whether this scrape could read the source of the gauges (postgres, temporal): 1 yes, 0 no; a source that is down leaves its gauges out',
    ['source'],
  );
  fromSnapshot(
    'tidemark_lag_windows',
    "Closed windows after each job's watermark (the watch's measure); a job with neither a watermark nor a start is left out",
    ['job'],
  );
  fromSnapshot('tidemark_effects', 'External effects by state and channel', ['state', 'channel']);
  fromSnapshot('tidemark_incidents_open', 'Open incidents by job and kind', ['job', 'kind']);
  if (o.client) {
    fromSnapshot('tidemark_backfills_running', 'Backfills running, by job', ['job']);
    fromSnapshot(
      'tidemark_backfill_windows',
      'Windows of the running backfills so far, by job and state: processed, already_done, running_elsewhere, failed, in_flight',
      ['job', 'state'],
    );
    fromSnapshot(
      'tidemark_task_queue_pollers',
      'Workers polling each task queue for workflow tasks, as the server lists them; 0: no worker runs that queue (the jobs, or the lag watch)',
      ['task_queue'],
    );
  }

  return {
    registry,
    sink: {
      window(e) {
        windows.inc({ job: e.job, outcome: e.outcome, reason: e.reason ?? '' });
        if (e.seconds !== undefined) duration.observe({ job: e.job, outcome: e.outcome }, e.seconds);
      },
    },
  };
}

type Add = (name: string, labels: Record<string, string>, value: number) => void;

async function fromPostgres(o: MetricsOptions, at: Date, add: Add): Promise<void> {
  // Every job's watermark in one statement, not one per job.
  const marks = new Map(
    (await o.db.selectFrom('job_watermarks').select(['job', 'watermark']).execute()).map((r) => [
      r.job,
      r.watermark,
    ]),
  );
  for (const job of o.catalog.jobs) {
    const watermark = marks.get(job.name) ?? job.start;
    if (watermark) add('tidemark_lag_windows', { job: job.name }, windowsBehind(job, watermark, at));
  }
  // Counts kept as effects change (effect_counts, migration 20261201T2000): a few rows, not the history.
  const effects = await o.db
    .selectFrom('effect_counts')
    .select(['status', 'channel', sql<string>`sum(n)`.as('n')])
    .groupBy(['status', 'channel'])
    .having(sql`sum(n)`, '<>', 0)
    .execute();
  for (const r of effects) add('tidemark_effects', { state: r.status, channel: r.channel }, Number(r.n));
  const incidents = await o.db
    .selectFrom('incidents')
    .select(['job', 'kind', sql<string>`count(*)`.as('n')])
    .where('closed_at', 'is', null)
    .groupBy(['job', 'kind'])
    .execute();
  for (const r of incidents) add('tidemark_incidents_open', { job: r.job, kind: r.kind }, Number(r.n));
}

/**
 * Running backfills (found by their search attributes) and what their progress query answers. A
 * query gets `queryMs`: one that gets no answer (no worker polls the backfill's queue) counts its
 * backfill as running with no progress, and leaves the others' and Temporal's answer alone.
 */
async function fromTemporal(
  client: Client,
  taskQueues: readonly string[],
  add: Add,
  queryMs: number,
): Promise<void> {
  const pollers = Promise.all(
    taskQueues.map(async (name) => {
      const q = await client.workflowService.describeTaskQueue({
        namespace: client.options.namespace,
        taskQueue: { name },
        taskQueueType: 1, // workflow tasks
      });
      add('tidemark_task_queue_pollers', { task_queue: name }, q.pollers?.length ?? 0);
    }),
  );
  // Awaited at the end; marked handled so that a failure while the backfills are read is not unhandled.
  pollers.catch(() => undefined);
  const found: { job: string; workflowId: string }[] = [];
  for await (const w of client.workflow.list({
    query: 'TidemarkKind = "backfill" AND ExecutionStatus = "Running"',
  })) {
    if (found.length >= MAX_BACKFILLS) break;
    found.push({ job: w.typedSearchAttributes.get(SA_JOB) ?? 'unknown', workflowId: w.workflowId });
  }
  const progress = await Promise.all(
    found.map(({ workflowId }) =>
      client
        .withDeadline(Date.now() + queryMs, () =>
          client.workflow.getHandle(workflowId).query<BackfillProgress>('progress'),
        )
        .catch(() => undefined),
    ),
  );
  const byJob = new Map<string, Record<string, number>>();
  found.forEach(({ job }, i) => {
    const p = progress[i];
    const t = byJob.get(job) ?? {};
    const counts = {
      running: 1,
      ...(p
        ? {
            processed: p.processed,
            already_done: p.alreadyDone,
            running_elsewhere: p.running,
            failed: p.failed.length,
            in_flight: p.inFlight,
          }
        : {}),
    };
    for (const [k, n] of Object.entries(counts)) t[k] = (t[k] ?? 0) + n;
    byJob.set(job, t);
  });
  for (const [job, t] of byJob) {
    add('tidemark_backfills_running', { job }, t.running ?? 0);
    for (const state of BACKFILL_STATES) add('tidemark_backfill_windows', { job, state }, t[state] ?? 0);
  }
  await pollers;
}

/** Reads every source; one that fails or is slow is reported down, and its gauges left out. */
async function readSources(o: MetricsOptions, at: Date, timeoutMs: number): Promise<Map<string, Sample[]>> {
  const out = new Map<string, Sample[]>();
  const sources: [string, (add: Add) => Promise<void>][] = [['postgres', (add) => fromPostgres(o, at, add)]];
  const client = o.client;
  if (client)
    sources.push([
      'temporal',
      (add) => fromTemporal(client, o.taskQueues ?? [], add, Math.min(1_000, timeoutMs / 2)),
    ]);
  await Promise.all(
    sources.map(async ([source, read]) => {
      const mine: [string, Sample][] = [];
      const ok = await within(timeoutMs, source, () =>
        read((name, labels, value) => mine.push([name, [labels, value]])),
      ).then(
        () => true,
        () => false,
      );
      for (const [name, sample] of ok ? mine : []) out.set(name, [...(out.get(name) ?? []), sample]);
      out.set('tidemark_metrics_source_up', [
        ...(out.get('tidemark_metrics_source_up') ?? []),
        [{ source }, ok ? 1 : 0],
      ]);
    }),
  );
  return out;
}
