// Years of history in the ledger, and the product's hot operations over it: a seed made with
// generate_series (three years of a minutely job and two hourly ones, their run records, effects,
// attempts, incidents, quarantine), a named list of operations that call the real functions, and
// a capture of the statements each one sends (pg's query, patched while it runs) to run again
// under EXPLAIN. Shared by test/system/scale.test.ts (plans and buffers) and bench/scale.ts
// (time). A new hot query is one more entry in `operations`.
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { planActivities } from '../activities/plan.js';
import { memoryLogger } from '../activities/logger.js';
import { openIncidents, listEffects } from '../db/effects.js';
import { withConnection } from '../db/connection.js';
import { claimWindow, finishWindow, readWatermark, windowAttemptsOf } from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import { previewBackfill } from '../operator/backfills.js';
import { recentDurations } from '../operator/durations.js';
import { effectsInDoubt } from '../operator/effects.js';
import { jobHealth } from '../operator/job-health.js';
import { jobsOverview, recentRuns, recentWindows } from '../operator/overview.js';
import { windowDetail } from '../operator/window-detail.js';
import { windowGrid } from '../operator/window-grid.js';
import { defineCatalog, type Catalog } from '../schedules/job.js';
import { createMetrics } from '../workers/metrics.js';
import { isoUtc, windowKey } from '../contract/window-key.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

/** The ledger's "now": every seeded window ends at or before it. */
export const SCALE_NOW = new Date('2026-11-30T00:00:00Z');
export const MINUTELY = 'scale-minutely';
export const HOURLY = ['scale-hourly-a', 'scale-hourly-b'] as const;

export function scaleCatalog(): Catalog {
  const handler = async () => ({ input: 0, applied: 0, quarantined: 0 });
  return defineCatalog([
    { name: MINUTELY, grid: '1m', timezone: 'UTC', lateness: '0s', handler },
    ...HOURLY.map((name) => ({ name, grid: '1h', timezone: 'Europe/Berlin', lateness: '5m', handler })),
  ]);
}

/**
 * Seeds the windows of every job that start in [from, to) as done (generation 0), each with a
 * window run record and a tick run record; per hourly window an e-mail effect with one attempt; a
 * closed incident a day per job; a quarantined record every 1,000 minutely windows. Every 10,000th
 * window failed once before it was done (attempts 2, a failed run). Rows go in in time order, as
 * the product writes them. Moves each job's watermark to `to`.
 */
export async function seedHistory(
  db: Kysely<Database>,
  from: Date,
  to: Date,
  log: (line: string) => void = () => undefined,
): Promise<void> {
  const t0 = performance.now();
  const lap = (what: string) => log(`${what}: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  // Secondary indexes are built once after the rows are in (as the migrations define them, read
  // back from the catalog), not kept up row by row: minutes become seconds.
  const secondary = (
    await sql<{ name: string; def: string }>`
      select i.indexname as name, i.indexdef as def from pg_indexes i
       where i.schemaname = current_schema() and i.tablename in ('job_windows', 'job_runs', 'effects', 'effect_attempts')
         and not exists (select 1 from pg_constraint c where c.conname = i.indexname)`.execute(db)
  ).rows;
  for (const i of secondary) await sql`drop index ${sql.id(i.name)}`.execute(db);
  const jobs = [{ job: MINUTELY, step: MINUTE }, ...HOURLY.map((job) => ({ job, step: HOUR }))];
  await Promise.all([
    // Windows and their run records on connections of their own: two cores, two writers.
    (async () => {
      for (const { job, step } of jobs)
        await sql`
          insert into job_windows (job, window_start, generation, window_end, window_key, status, attempts, trigger,
                                   workflow_id, started_at, finished_at, duration_ms, records_in, records_applied,
                                   records_quarantined)
          select ${job}, s, 0, s + ${`${step} milliseconds`}::interval,
                 ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'done',
                 case when n % 10000 = 0 then 2 else 1 end, 'schedule',
                 ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                 s + ${`${step} milliseconds`}::interval + interval '2 seconds',
                 s + ${`${step} milliseconds`}::interval + interval '3 seconds', 1000, 10, 10, 0
            from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond',
                                 ${`${step} milliseconds`}::interval) with ordinality as g(s, n)`.execute(db);
      lap('windows');
    })(),
    (async () => {
      // A tick record, then the window's record, window by window, as the product writes them: the
      // newest ids are the busiest job's (the minutely one, seeded last) and its kinds interleave.
      for (const { job, step } of [...jobs].reverse())
        await sql`
          insert into job_runs (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at,
                                duration_ms, outcome, details)
          select r.kind, ${job}, case when r.tick then null else s end, case when r.tick then null else 0 end,
                 ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
                 case when r.tick then null when n % 10000 = 0 then 2 else 1 end,
                 r.at, r.at + interval '1 second',
                 1000, r.outcome, case when r.tick then ${'{"started":1,"alreadyDone":0}'}::jsonb
                                       else ${'{"input":10,"applied":10,"quarantined":0}'}::jsonb end
            from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond',
                                 ${`${step} milliseconds`}::interval) with ordinality as g(s, n)
           cross join lateral (values ('tick', true, s + ${`${step} milliseconds`}::interval, 'started'),
                 ('window', false, s + ${`${step} milliseconds`}::interval + interval '2 seconds', 'processed'))
                 as r(kind, tick, at, outcome)`.execute(db);
      lap('runs');
    })(),
  ]);
  for (const { job, step } of jobs)
    await sql`
      insert into job_runs (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at,
                            duration_ms, outcome, reason)
      select 'window', ${job}, s, 0, ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 1,
             s + ${`${step} milliseconds`}::interval, s + ${`${step} milliseconds`}::interval + interval '1 second',
             1000, 'failed', 'handler error'
        from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond',
                             ${`${step} milliseconds`}::interval) with ordinality as g(s, n)
       where n % 10000 = 0`.execute(db);
  lap('windows and runs');
  for (const job of HOURLY) {
    await sql`
      insert into effects (effect_key, job, window_key, name, channel, policy, status, fence, attempts, request,
                           provider_key, provider_id, created_at, begun_at, done_at, updated_at)
      select k || ':report', ${job}, k, 'report', 'email', 'ask', 'done', 1, 1,
             '{"to":["ops@example.com"],"subject":"report"}'::jsonb, k || ':report', 'msg-' || n, e, e, e, e
        from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond', interval '1 hour')
             with ordinality as g(s, n),
             lateral (select ${job} || '/' || to_char(s at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as k,
                             s + interval '1 hour 3 seconds' as e) x`.execute(db);
    await sql`
      insert into effect_attempts (effect_key, fence, started_at, finished_at, duration_ms, outcome, provider_id)
      select effect_key, 1, begun_at, done_at, 200, 'done', provider_id from effects
       where job = ${job} and created_at >= ${from} order by created_at`.execute(db);
  }
  // A few effects in doubt, as an operator would leave them for a while: the last three of one job.
  await sql`
    update effects set status = 'unknown', last_error = 'reply lost'
     where effect_key in (select effect_key from effects where job = ${HOURLY[0]} order by created_at desc limit 3)`.execute(
    db,
  );
  for (const { job } of jobs) {
    await sql`
      insert into incidents (job, subject, kind, opened_at, closed_at, occurrences, last_error)
      select ${job}, ${job} || '/' || to_char(d at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'window', d,
             d + interval '10 minutes', 2, 'handler error'
        from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond', interval '1 day') d`.execute(
      db,
    );
  }
  await sql`
    insert into quarantine (job, window_start, generation, record_key, reason, payload, created_at)
    select ${MINUTELY}, s, 0, 'order-' || n, 'amount: missing', '{}'::jsonb, s + interval '1 minute'
      from generate_series(${from}::timestamptz, ${to}::timestamptz - interval '1 millisecond', interval '1000 minutes')
           with ordinality as g(s, n)`.execute(db);
  for (const { job } of jobs)
    await sql`
      insert into job_watermarks (job, watermark, updated_at) values (${job}, ${to}, ${to})
      on conflict (job) do update set watermark = greatest(job_watermarks.watermark, excluded.watermark)`.execute(
      db,
    );
  lap('effects, incidents, quarantine');
  await Promise.all(secondary.map((i) => sql.raw(i.def).execute(db)));
  lap('indexes');
  await sql`vacuum analyze`.execute(db);
  lap('vacuum analyze');
}

/** Three years before SCALE_NOW, less the last day (seeded first, as the baseline). */
export const HISTORY_FROM = new Date(SCALE_NOW.getTime() - 3 * 365 * DAY);
export const RECENT_FROM = new Date(SCALE_NOW.getTime() - DAY);

export interface ScaleContext {
  db: Kysely<Database>;
  client: Client;
  catalog: Catalog;
  now: Date;
}

/** One of the product's hot operations: the real function, as the product calls it. */
export interface Operation {
  name: string;
  /** What it is, for the report. */
  what: string;
  run(ctx: ScaleContext): Promise<unknown>;
  /**
   * Known to read the job's whole history, and why (a defect not fixed yet): the test asserts it
   * still does, so that a fix must also take this away and bring it under the flat check.
   */
  readsHistory?: string;
  /** Puts back what `run` changed (inside the transaction that replays it, rolled back after). */
  rewind?(ctx: ScaleContext): Promise<string[]>;
}

const webConfig = { TIDEMARK_WEB_UI_URL: 'http://127.0.0.1:8233', TEMPORAL_NAMESPACE: 'default' };
const deps = (ctx: ScaleContext) => ({
  db: ctx.db,
  catalog: ctx.catalog,
  logger: memoryLogger(),
  now: () => ctx.now,
});

/** The window the next commit takes: the one at the minutely job's watermark. */
async function nextWindow(ctx: ScaleContext) {
  const start = (await readWatermark(ctx.db, MINUTELY)) ?? RECENT_FROM;
  return {
    job: MINUTELY,
    start,
    end: new Date(start.getTime() + MINUTE),
    generation: 0,
    key: windowKey(MINUTELY, start),
  };
}

let committed: { start: Date } | undefined;

export const operations: readonly Operation[] = [
  {
    name: 'tick_plan',
    what: "a tick's planning of the minutely job (watermark, done and failed windows since it)",
    run: (ctx) => planActivities(deps(ctx)).planTick({ job: MINUTELY, now: isoUtc(ctx.now) }),
  },
  {
    name: 'window_commit',
    what: "a window's claim and finish (the claim function, then the finish function with the commit)",
    async run(ctx) {
      const w = await nextWindow(ctx);
      committed = { start: w.start };
      await withConnection(ctx.db, (conn) =>
        conn.transaction().execute(async (trx) => {
          await claimWindow(trx, w, { trigger: 'schedule', workflowId: w.key, at: ctx.now });
          await finishWindow(trx, w, {
            counts: { input: 1, applied: 1, quarantined: 0 },
            startedAt: ctx.now,
            finishedAt: ctx.now,
            workflowId: w.key,
            attempt: 1,
          });
        }),
      );
    },
    // Replayed as it ran: the window not there yet, the watermark at its start.
    rewind: async () => [
      `delete from job_windows where job = '${MINUTELY}' and window_start = '${committed!.start.toISOString()}'`,
      `update job_watermarks set watermark = '${committed!.start.toISOString()}' where job = '${MINUTELY}'`,
    ],
  },
  {
    name: 'overview',
    what: 'the jobs overview: schedule, watermark and last run of each job',
    run: (ctx) => jobsOverview(ctx.db, ctx.client, ctx.catalog, ctx.now),
  },
  {
    name: 'overview_health',
    what: "the page overview's health of the minutely job (done, failed, missing windows)",
    run: (ctx) => jobHealth(ctx.db, ctx.client, ctx.catalog.get(MINUTELY), ctx.now),
  },
  {
    name: 'recent_windows',
    what: "a job's recent windows with their effects (CLI status, 20 rows)",
    run: (ctx) => recentWindows(ctx.db, HOURLY[0], 20),
  },
  {
    name: 'cli_runs',
    what: "a job's newest run records of every kind (tidemark runs, 20 rows)",
    run: (ctx) => recentRuns(ctx.db, MINUTELY, { limit: 20 }),
  },
  {
    name: 'durations',
    what: "a job's last 48 window runs (the page's sparkline)",
    run: (ctx) => recentDurations(ctx.db, MINUTELY),
  },
  {
    name: 'grid',
    what: 'the window grid: the last day of the minutely job',
    run: (ctx) =>
      windowGrid({
        db: ctx.db,
        client: ctx.client,
        job: ctx.catalog.get(MINUTELY),
        now: ctx.now,
        from: isoUtc(new Date(ctx.now.getTime() - DAY)),
        to: isoUtc(ctx.now),
      }),
  },
  {
    name: 'grid_week',
    what: 'the window grid of an hourly job, its default week',
    run: (ctx) =>
      windowGrid({ db: ctx.db, client: ctx.client, job: ctx.catalog.get(HOURLY[0]), now: ctx.now }),
  },
  {
    name: 'backfill_dry_run',
    what: 'a backfill dry run over the last day of the minutely job (1,440 windows)',
    run: (ctx) =>
      previewBackfill(
        ctx.db,
        ctx.catalog.get(MINUTELY),
        { from: isoUtc(new Date(ctx.now.getTime() - DAY)), to: isoUtc(ctx.now), zone: 'utc' },
        { now: ctx.now, limit: 10_000 },
      ),
  },
  {
    name: 'window_detail',
    what: "one hourly window's detail: ledger, runs, effects with attempts, incidents, reruns",
    run: (ctx) =>
      windowDetail({
        db: ctx.db,
        client: ctx.client,
        config: webConfig,
        job: ctx.catalog.get(HOURLY[0]),
        key: isoUtc(new Date(SCALE_NOW.getTime() - 3 * HOUR)),
        now: ctx.now,
      }),
  },
  {
    name: 'window_effects',
    what: "a window's effects (as the window run lists them after its commit)",
    run: (ctx) =>
      listEffects(ctx.db, { windowKey: windowKey(HOURLY[0], new Date(SCALE_NOW.getTime() - 3 * HOUR)) }),
  },
  {
    name: 'effects_in_doubt',
    what: 'effects in doubt (the page and the CLI)',
    run: (ctx) => effectsInDoubt(ctx.db),
  },
  {
    name: 'metrics_scrape',
    what: "a /metrics scrape's PostgreSQL gauges (lag, effects by state, open incidents)",
    run: (ctx) => createMetrics({ db: ctx.db, catalog: ctx.catalog, now: () => ctx.now }).registry.metrics(),
  },
  {
    name: 'alert_window_attempts',
    what: "an alert's window attempts (read on the raise of a window's incident)",
    run: (ctx) =>
      windowAttemptsOf(ctx.db, HOURLY[0], windowKey(HOURLY[0], new Date(SCALE_NOW.getTime() - 3 * HOUR))),
  },
  {
    name: 'incidents_open',
    what: 'open incidents (the page and the CLI)',
    run: (ctx) => openIncidents(ctx.db),
  },
];

export interface Captured {
  text: string;
  values: unknown[];
}

/**
 * The statements `fn` sends, as pg is asked to run them (text and parameters). pg's query is
 * patched while `fn` runs, so nothing else may use the database meanwhile.
 */
export async function capture(fn: () => Promise<unknown>): Promise<Captured[]> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const seen: Captured[] = [];
  proto.query = function (this: unknown, ...args: unknown[]) {
    const [q, v] = args;
    if (typeof q === 'string') seen.push({ text: q, values: Array.isArray(v) ? v : [] });
    else if (q && typeof q === 'object' && 'text' in q)
      seen.push({
        text: String((q as { text: unknown }).text),
        values: ((q as { values?: unknown[] }).values ?? (Array.isArray(v) ? v : [])) as unknown[],
      });
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  // Transaction control is not a query to explain; claim and finish carry theirs in their text.
  return seen
    .flatMap((c) =>
      c.values.length === 0
        ? c.text
            .split(/;\s*(?=begin\b|commit\b|select\b|$)/i)
            .map((text) => ({ text: text.trim(), values: [] }))
        : [c],
    )
    .filter((c) => c.text !== '' && !/^(begin|commit|rollback|savepoint|release)\b/i.test(c.text));
}

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

export interface Explained {
  text: string;
  plan: PlanNode;
  buffers: number;
}

/** Each captured statement run again under EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back. */
export async function explainAll(
  url: string,
  statements: Captured[],
  rewind: string[] = [],
): Promise<Explained[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('begin');
    for (const r of rewind) await client.query(r);
    const out: Explained[] = [];
    for (const s of statements) {
      const res = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `explain (analyze, buffers, format json) ${s.text}`,
        s.values,
      );
      const plan = res.rows[0]!['QUERY PLAN'][0].Plan;
      out.push({
        text: s.text,
        plan,
        buffers: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0),
      });
    }
    return out;
  } finally {
    await client.query('rollback').catch(() => undefined);
    await client.end();
  }
}

export function* nodes(p: PlanNode): Generator<PlanNode> {
  yield p;
  for (const c of p.Plans ?? []) yield* nodes(c);
}

export const BIG_TABLES = [
  'job_windows',
  'job_runs',
  'effects',
  'effect_attempts',
  'incidents',
  'quarantine',
];

/** What a plan does that grows with the history: a sequential scan of a big table, a sort of many rows. */
export function planProblems(e: Explained, maxSortRows: number): string[] {
  const problems: string[] = [];
  for (const n of nodes(e.plan)) {
    if (n['Node Type'] === 'Seq Scan' && BIG_TABLES.includes(n['Relation Name'] ?? ''))
      problems.push(`Seq Scan on ${n['Relation Name']}`);
    // A sort's cost is what goes in (a top-N sort under a limit puts out few of many).
    const sorted = (n.Plans ?? []).reduce(
      (a, c) => a + (c['Actual Rows'] ?? 0) * (c['Actual Loops'] ?? 1),
      0,
    );
    if ((n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort') && sorted > maxSortRows)
      problems.push(`${n['Node Type']} of ${sorted} rows`);
  }
  return problems;
}
