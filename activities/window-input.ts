// The window an activity is asked to run, checked against its job's grid and the clock before
// anything is written: a window that is not closed yet is a wait, retried, never a failure.
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE } from '../contract/failures.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import type { WindowInput } from '../contract/workflows.js';
import type { WindowRef } from '../db/ledger.js';
import { isClosed, windowAt } from '../schedules/windows.js';
import type { ActivityDeps } from './deps.js';
import { CLOCK_SKEW_TOLERANCE_MS, badInput } from './errors.js';
import { jobOrFail } from './plan.js';

/** Checks the window against the job's grid and the clock before anything is written. */
export function resolveWindow(deps: ActivityDeps, input: WindowInput): WindowRef {
  const job = jobOrFail(deps, input.job);
  const start = new Date(input.start);
  const end = new Date(input.end);
  if (Number.isNaN(start.getTime()) || Number.isNaN(end.getTime())) {
    throw badInput(
      FAILURE.badWindow,
      `window start "${input.start}" / end "${input.end}" must be ISO-8601 instants`,
    );
  }
  const expected = windowAt(job.grid, job.timezone, start);
  if (expected.start.getTime() !== start.getTime() || expected.end.getTime() !== end.getTime()) {
    throw badInput(
      FAILURE.badWindow,
      `[${input.start}, ${input.end}) is not a window of job "${job.name}" (grid "${job.grid.label}" in ${job.timezone}); the window containing ${input.start} is [${isoUtc(expected.start)}, ${isoUtc(expected.end)})`,
    );
  }
  const now = deps.now();
  const asOf = input.asOf === undefined ? undefined : new Date(input.asOf);
  if (asOf && Number.isNaN(asOf.getTime())) {
    throw badInput(FAILURE.badWindow, `asOf "${input.asOf}" must be an ISO-8601 instant (the server's time)`);
  }
  if (!isClosed(expected, now, job.latenessMs)) {
    const dueInMs = end.getTime() + job.latenessMs - now.getTime();
    // Closed by the Temporal server's clock (the workflow's), not by this worker's: one of them is
    // off. Processed once both say closed: waiting, however long, is never a failure (a worker
    // clock behind would fail closed windows for good) and never early (a server clock ahead).
    const serverSaysClosed = asOf !== undefined && isClosed(expected, asOf, job.latenessMs);
    if (serverSaysClosed || dueInMs < CLOCK_SKEW_TOLERANCE_MS) {
      const behind = serverSaysClosed
        ? `; the Temporal server's clock says it closed: this worker's clock is ${Math.round((asOf.getTime() - now.getTime()) / 1000)} s behind it`
        : '';
      deps.logger.info(
        `${serverSaysClosed ? 'CLOCK' : 'WAITING'} job=${job.name} window=${windowKey(job.name, start)}: closes in ${dueInMs} ms by this worker's clock${behind}`,
      );
      const retryInMs = Math.ceil(dueInMs / 1000) * 1000 + 1000;
      throw ApplicationFailure.create({
        type: FAILURE.windowNotClosedYet,
        nonRetryable: false,
        nextRetryDelay: retryInMs,
        // The workflow reads the delay here: nextRetryDelay does not reach it (the SDK drops it).
        details: [{ retryInMs }],
        message: `window ${windowKey(job.name, start)} closes in ${dueInMs} ms by this worker's clock (clock skew?)${behind}; retrying then`,
      });
    }
    throw badInput(
      FAILURE.windowNotClosed,
      `window ${windowKey(job.name, start)} is not closed yet: it may be processed from ${isoUtc(new Date(end.getTime() + job.latenessMs))}`,
    );
  }
  const generation = input.generation ?? 0;
  return { job: job.name, start, end, generation, key: windowKey(job.name, start, generation) };
}
