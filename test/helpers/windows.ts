// Hourly windows and jobs for driving the window activity directly, without Temporal: the ledger's
// tests and the ingest bench build them here so that all of them hand the activity the same input.
import type { Kysely } from 'kysely';
import { createActivities, type ActivityDeps } from '../../activities/index.js';
import { memoryLogger } from '../../activities/logger.js';
import type { Database } from '../../db/schema.js';
import { type Job, type JobSpec } from '../../schedules/job.js';
import { defineCatalog } from '../../schedules/define.js';
import { isoUtc } from '../../contract/window-key.js';
import type { WindowInput } from '../../contract/workflows.js';

const HOUR = 3_600_000;

/** A window run's policy: `maximumAttempts` attempts a second apart, each within `startToCloseTimeoutMs`. */
export const windowPolicy = (maximumAttempts: number, startToCloseTimeoutMs: number) => ({
  retry: { maximumAttempts, initialInterval: '1s', maximumInterval: '1s', backoffCoefficient: 1 },
  startToCloseTimeoutMs,
});

/** The `i`-th hourly window from `t0` (ms), as a tick or a manual run hands it to the window activity. */
export function hourlyWindow(
  job: string,
  t0: number,
  i: number,
  policy: WindowInput['policy'],
  trigger: WindowInput['trigger'] = 'manual',
  generation = 0,
): WindowInput {
  const start = isoUtc(new Date(t0 + i * HOUR));
  return {
    job,
    start,
    end: isoUtc(new Date(t0 + (i + 1) * HOUR)),
    generation,
    key: `${job}/${start}`,
    trigger,
    policy,
  };
}

/** An hourly UTC job from `t0` (ms) whose windows `handler` processes. */
export const hourlyJob = (name: string, t0: number, handler: JobSpec['handler']): JobSpec => ({
  name,
  grid: '1h',
  timezone: 'UTC',
  start: isoUtc(new Date(t0)),
  handler,
});

/**
 * The activities over `jobs` with a memory logger and the real clock, as a worker would build them;
 * `extra` adds deps (a redactor, say).
 */
export const directActivities = (
  db: Kysely<Database>,
  jobs: readonly (JobSpec | Job)[],
  extra: Partial<ActivityDeps> = {},
) =>
  createActivities({
    db,
    catalog: defineCatalog(jobs),
    logger: memoryLogger(),
    now: () => new Date(),
    ...extra,
  });
