// Planning activities: which windows a tick or a backfill should start, and their records.
import { doneStarts, doneWindows, failedStarts, recordRun, watermarkOf } from '../db/ledger.js';
import { msUntilAllowed } from '../schedules/hours.js';
import { type Job } from '../schedules/job.js';
import { UnknownJobError } from '../schedules/define.js';
import {
  isAligned,
  isClosed,
  windowAt,
  windowsFrom,
  windowsInRange,
  type Window,
} from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import type {
  BackfillPage,
  BackfillResult,
  TickPlan,
  TickResult,
  WindowSpec,
} from '../contract/workflows.js';
import { alerting } from './alerts.js';
import { CRASH_POINT, reached } from './crash-points.js';
import { policyOf, type ActivityDeps } from './deps.js';
import { FAILURE } from '../contract/failures.js';
import { badInput } from './errors.js';
import { noMetrics } from './metrics.js';

export function jobOrFail(deps: ActivityDeps, name: string): Job {
  try {
    return deps.catalog.get(name);
  } catch (err) {
    if (err instanceof UnknownJobError) throw badInput(FAILURE.unknownJob, err.message);
    throw err;
  }
}

function spec(job: Job, w: Window): WindowSpec {
  return {
    job: job.name,
    start: isoUtc(w.start),
    end: isoUtc(w.end),
    generation: 0,
    key: windowKey(job.name, w.start),
  };
}

function parseInstant(field: string, text: string): Date {
  const t = new Date(text);
  if (Number.isNaN(t.getTime()))
    throw badInput(FAILURE.badRange, `${field}: "${text}" is not an ISO-8601 instant`);
  return t;
}

/** The job's first watermark: its declared start, else the start of the latest closed window. */
function initialWatermark(job: Job, now: Date): Date {
  if (job.start) return job.start;
  const current = windowAt(job.grid, job.timezone, new Date(now.getTime() - job.latenessMs));
  return windowAt(job.grid, job.timezone, new Date(current.start.getTime() - 1)).start;
}

export function planActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  const alerts = alerting(deps);
  return {
    /** Closed windows from the watermark on that are not done yet, oldest first, at most the cap. */
    async planTick(input: { job: string; now: string }): Promise<TickPlan> {
      const job = jobOrFail(deps, input.job);
      const now = parseInstant('now', input.now);
      const watermark = await watermarkOf(db, job.name, initialWatermark(job, now));
      if (!isAligned(job.grid, job.timezone, watermark)) {
        throw badInput(
          FAILURE.badWindow,
          `job "${job.name}": watermark ${isoUtc(watermark)} is not on the "${job.grid.label}" grid in ${job.timezone} (was the grid changed?)`,
        );
      }
      const done = await doneStarts(db, job.name, watermark, now);
      const failed = await failedStarts(db, job.name, watermark, now);
      const fresh: Window[] = [];
      const retryable: Window[] = [];
      let alreadyDone = 0;
      for (const w of windowsFrom(job.grid, job.timezone, watermark, (w) =>
        isClosed(w, now, job.latenessMs),
      )) {
        if (done.has(w.start.getTime())) alreadyDone++;
        else if (failed.has(w.start.getTime())) retryable.push(w);
        else if (fresh.push(w) >= job.maxCatchUp) break;
      }
      // Failed windows retry outside the cap, with a budget of their own (the cap again), so a
      // window that keeps failing holds the watermark but never keeps newer windows waiting. They
      // take turns, least recently tried first: one that keeps failing cannot hold the budget
      // while a newer failed window that would succeed now waits behind it.
      const lastTried = (w: Window) => failed.get(w.start.getTime())!;
      const retries = retryable
        .sort((a, b) => lastTried(a) - lastTried(b) || a.start.getTime() - b.start.getTime())
        .slice(0, job.maxCatchUp);
      const windows = [...retries, ...fresh]
        .sort((a, b) => a.start.getTime() - b.start.getTime())
        .map((w) => spec(job, w));
      const recovered = await alerts.resolve(db, {
        job: job.name,
        subject: 'tick',
        note: 'a tick planned its windows again',
      });
      return {
        job: job.name,
        now: isoUtc(now),
        watermark: isoUtc(watermark),
        windows,
        alreadyDone,
        policy: policyOf(job),
        recovery: recovered?.deliveries ?? [],
      };
    },

    /** How long a window must wait for its job's allowed hours (0: it may run now). */
    async msUntilAllowed(input: {
      now: string;
      hours: { from: string; to: string; timezone: string };
    }): Promise<number> {
      return msUntilAllowed(new Date(input.now), input.hours, input.hours.timezone);
    },

    /** Logs and records what a tick did. */
    async recordTick(input: { result: TickResult; startedAt: string; workflowId: string }): Promise<void> {
      const { result } = input;
      for (const key of result.running) {
        logger.info(`SKIPPED reason=running job=${result.job} window=${key}`, {
          job: result.job,
          window: key,
          outcome: 'skipped',
          reason: 'running',
        });
        (deps.metrics ?? noMetrics).window({ job: result.job, outcome: 'skipped', reason: 'running' });
      }
      const outcome = result.started.length > 0 ? 'started' : 'nothing-to-do';
      logger.info(
        `TICK job=${result.job} now=${result.now} watermark=${result.watermark} started=${result.started.length} running=${result.running.length} already-done=${result.alreadyDone}`,
        {
          job: result.job,
          kind: 'tick',
          outcome,
          now: result.now,
          watermark: result.watermark,
          started: result.started.length,
          running: result.running.length,
          alreadyDone: result.alreadyDone,
        },
      );
      await recordRun(db, {
        kind: 'tick',
        job: result.job,
        workflowId: input.workflowId,
        startedAt: new Date(input.startedAt),
        finishedAt: deps.now(),
        outcome,
        details: { ...result },
      });
    },

    /** One page of a backfill: closed windows in [from, to) not done yet, oldest first. */
    async planBackfill(input: {
      job: string;
      from: string;
      to: string;
      limit: number;
    }): Promise<BackfillPage> {
      const job = jobOrFail(deps, input.job);
      const from = parseInstant('from', input.from);
      const to = parseInstant('to', input.to);
      if (!(from < to))
        throw badInput(FAILURE.badRange, `from (${input.from}) must be before to (${input.to})`);
      const now = deps.now();
      // A window's commit moves the watermark only where the job has one: a job that has not
      // ticked yet gets the one its first tick would set (its declared start), or a backfill leaves
      // it unmoved, and the lag watch reports every backfilled window behind until a tick comes.
      if (job.start) await watermarkOf(db, job.name, job.start);
      const page = windowsInRange(job.grid, job.timezone, from, to, input.limit + 1).filter((w) =>
        isClosed(w, now, job.latenessMs),
      );
      const hasMore = page.length > input.limit;
      const windows = page.slice(0, input.limit);
      const last = windows.at(-1);
      const done = await doneWindows(db, job.name, windows);
      await reached(deps, CRASH_POINT.backfillPage, `${job.name}@${isoUtc(from)}`);
      return {
        windows: windows.filter((w) => !done.has(w.start.getTime())).map((w) => spec(job, w)),
        alreadyDone: done.size,
        next: hasMore && last ? isoUtc(last.end) : null,
        policy: policyOf(job),
      };
    },

    async recordBackfill(input: {
      result: BackfillResult;
      startedAt: string;
      workflowId: string;
    }): Promise<void> {
      const { result } = input;
      const outcome = result.failed.length > 0 ? 'failed' : 'completed';
      logger.info(
        `BACKFILL job=${result.job} from=${result.from} to=${result.to} processed=${result.processed} already-done=${result.alreadyDone} running=${result.running} failed=${result.failed.length}`,
        {
          job: result.job,
          kind: 'backfill',
          outcome,
          from: result.from,
          to: result.to,
          processed: result.processed,
          alreadyDone: result.alreadyDone,
          running: result.running,
          failed: result.failed.length,
        },
      );
      await recordRun(db, {
        kind: 'backfill',
        job: result.job,
        workflowId: input.workflowId,
        startedAt: new Date(input.startedAt),
        finishedAt: deps.now(),
        outcome,
        reason: result.failed.length > 0 ? `failed windows: ${result.failed.join(', ')}` : null,
        details: { ...result },
      });
    },
  };
}
