// Activity options shared by the workflows. Every activity call has a bounded retry policy.
import {
  ActivityFailure,
  ApplicationFailure,
  RetryState,
  type Duration,
  type RetryPolicy,
} from '@temporalio/common';
import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { BAD_INPUT } from '../contract/failures.js';
import type { ActivityPolicy, WindowInput, WindowResult } from '../contract/workflows.js';

/** The job's retry policy; its intervals were validated as durations when the job was defined. */
export function retryOf(policy: ActivityPolicy, extraNonRetryable: readonly string[] = []): RetryPolicy {
  const r = policy.retry;
  return {
    maximumAttempts: r.maximumAttempts,
    backoffCoefficient: r.backoffCoefficient,
    initialInterval: r.initialInterval as Duration,
    maximumInterval: r.maximumInterval as Duration,
    nonRetryableErrorTypes: [...BAD_INPUT, ...extraNonRetryable],
  };
}

/**
 * Short bookkeeping activities (planning, records): a few statements each. An attempt lost with
 * its worker is retried after this timeout, so it is short: a tick or a backfill page stalled
 * a minute for each worker that died while planning it (seen in the fault suite).
 */
export const bookkeeping = proxyActivities<Activities>({
  startToCloseTimeout: '20 seconds',
  retry: {
    maximumAttempts: 10,
    initialInterval: '1s',
    maximumInterval: '30s',
    nonRetryableErrorTypes: [...BAD_INPUT],
  },
});

/** The window activity, with the job's own retry policy and attempt timeout. */
export function windowActivity(policy: ActivityPolicy) {
  return proxyActivities<Activities>({
    startToCloseTimeout: policy.startToCloseTimeoutMs,
    ...(policy.heartbeatTimeoutMs ? { heartbeatTimeout: policy.heartbeatTimeoutMs } : {}),
    retry: retryOf(policy),
  });
}

/**
 * How soon a local attempt lost with its worker runs again: the window's workflow task times out
 * (Temporal's default workflow task timeout) and another worker replays it.
 */
export const LOCAL_FAILOVER_MS = 10_000;

/**
 * The longest attempt timeout run locally (window revision 2 on): a local attempt keeps its
 * workflow task alive with task heartbeats, about 22 history events a minute, so an attempt allowed
 * to run for days could reach the history's event limit, and the window be terminated unalerted.
 */
export const LOCAL_MAX_MS = 10 * 60_000;

/**
 * Whether the window activity may run as a local activity, inside the window's workflow task: one
 * server round trip per window instead of three (schedule, complete, next workflow task). Not for
 * jobs that heartbeat (a local activity cannot), nor for jobs that wait for allowed hours, nor for
 * jobs whose attempt timeout is shorter than a local attempt's failover (they asked for a lost
 * attempt to be retried sooner than that) or, from revision 2, longer than LOCAL_MAX_MS.
 */
export function runsLocally(policy: ActivityPolicy, revision = 0): boolean {
  return (
    !policy.heartbeatTimeoutMs &&
    !policy.allowedHours &&
    policy.startToCloseTimeoutMs >= LOCAL_FAILOVER_MS &&
    (revision < 2 || policy.startToCloseTimeoutMs <= LOCAL_MAX_MS)
  );
}

/**
 * The window activity as a local activity: the same attempt timeout and retry policy, the retries
 * run by the worker (backoffs over a minute as a durable timer). A worker lost mid-attempt is
 * noticed by its workflow task's timeout (LOCAL_FAILOVER_MS, not the attempt timeout), and the
 * attempt runs again on another worker even when the policy allows one attempt: the ledger's claim
 * decides, as for any retry.
 */
export function windowLocalActivity(policy: ActivityPolicy): {
  processWindow: (input: WindowInput) => Promise<WindowResult>;
} {
  const retry = retryOf(policy);
  const local = proxyLocalActivities<Activities>({
    startToCloseTimeout: policy.startToCloseTimeoutMs,
    retry,
  });
  return {
    processWindow: (input) =>
      local.processWindow(input).catch((err: unknown) => {
        throw asActivityFailure(err, 'processWindow', retry);
      }),
  };
}

/**
 * A local activity's last failure reaches the workflow as the activity threw it; a regular
 * activity's comes wrapped in an ActivityFailure that says why it was not retried. Wrapped the
 * same way, the window fails alike either way: in its history, its alerts, and for its callers.
 * (Timeouts and cancellations arrive wrapped already.)
 */
function asActivityFailure(err: unknown, activityType: string, retry: RetryPolicy): unknown {
  if (!(err instanceof ApplicationFailure)) return err;
  const final = err.nonRetryable || (retry.nonRetryableErrorTypes ?? []).includes(err.type ?? '');
  return new ActivityFailure(
    'Activity task failed',
    activityType,
    undefined,
    final ? RetryState.NON_RETRYABLE_FAILURE : RetryState.MAXIMUM_ATTEMPTS_REACHED,
    undefined,
    err,
  );
}
