// The product's hot operations over years of history, each calling the real function as the
// product does: a named list that test/system/bench/scale.test.ts runs under EXPLAIN and
// bench/scale.ts times. A new hot query is one more entry in `operations`.
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import { planActivities } from '../activities/plan.js';
import { memoryLogger } from '../activities/logger.js';
import { openIncidents, listEffects } from '../db/effects.js';
import { withConnection } from '../db/connection.js';
import { claimWindow, finishWindow, readWatermark, windowAttemptsOf } from '../db/ledger.js';
import { schemaOf } from '../db/ledger-schema.js';
import type { Database } from '../db/schema.js';
import { previewBackfill } from '../operator/backfills.js';
import { recentDurations } from '../operator/durations.js';
import { effectsInDoubt } from '../operator/effects.js';
import { jobHealth } from '../operator/job-health.js';
import { jobsOverview, recentRuns, recentWindows } from '../operator/overview.js';
import { windowDetail } from '../operator/window-detail.js';
import { windowGrid } from '../operator/window-grid.js';
import type { Catalog } from '../schedules/job.js';
import { createMetrics } from '../workers/metrics.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import { HOURLY, MINUTELY, RECENT_FROM, SCALE_NOW } from './scale-ledger.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;
const DAY = 86_400_000;

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
    rewind: async (ctx) => [
      `delete from ${schemaOf(ctx.db)}.job_windows where job = '${MINUTELY}' and window_start = '${committed!.start.toISOString()}'`,
      `update ${schemaOf(ctx.db)}.job_watermarks set watermark = '${committed!.start.toISOString()}' where job = '${MINUTELY}'`,
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
