// Alerting from workflow code: open an incident through an activity, then deliver its
// notices on every channel at once; one channel failing does not stop the others.
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure } from '@temporalio/common';
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { EFFECT_REFUSALS } from '../contract/failures.js';
import type { RaiseInput } from '../activities/alerts.js';
import { bookkeeping } from './policy.js';

/** Deliveries retry a few times; one still undelivered after that is driven again by the watch. */
const delivery = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    maximumAttempts: 5,
    initialInterval: '500ms',
    maximumInterval: '5s',
    nonRetryableErrorTypes: [...EFFECT_REFUSALS],
  },
});

export async function deliver(keys: readonly string[] | undefined): Promise<void> {
  if (!keys || keys.length === 0) return;
  const results = await Promise.allSettled(keys.map((key) => delivery.performEffect({ key })));
  await deliver(findingAlerts(results));
}

/**
 * The alerts of findings that effect attempts recorded (an effect performed twice), for the
 * caller to deliver like every other alert.
 */
export function findingAlerts(
  results: readonly PromiseSettledResult<{ readonly alerts?: readonly string[] }>[],
): readonly string[] {
  return results.flatMap((r) => (r.status === 'fulfilled' ? (r.value.alerts ?? []) : []));
}

/** One attempt each at alerts that were not delivered before; the watch spaces the next ones out. */
const redelivery = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 1 },
});

export async function redeliver(keys: readonly string[]): Promise<void> {
  const results = await Promise.allSettled(keys.map((key) => redelivery.performEffect({ key })));
  await deliver(findingAlerts(results));
}

export async function raise(input: RaiseInput): Promise<void> {
  const { deliveries } = await bookkeeping.raiseIncident(input);
  await deliver(deliveries);
}

/** The innermost message of a failure: what the activity said, not "Activity task failed". */
export function describeFailure(err: unknown): string {
  let e: unknown = err;
  while ((e instanceof ActivityFailure || e instanceof ChildWorkflowFailure) && e.cause) e = e.cause;
  if (e instanceof ApplicationFailure && e.type) return `${e.message} (${e.type})`;
  return e instanceof Error ? e.message : String(e);
}
