// watch: fired by its own schedule; measures every job's lag and alerts or clears, then drives
// again the alerts that could not be delivered and reports a channel that stays down.
import { patched } from '@temporalio/workflow';
import { deliver, redeliver } from './alerts.js';
import { bookkeeping } from './policy.js';
import type { WatchResult } from '../activities/watch.js';

export async function watch(input: { now?: string } = {}): Promise<WatchResult> {
  const result = await bookkeeping.checkLag(input);
  await deliver(result.deliveries);
  // Runs started before this step existed replay without it.
  if (patched('watch-redrives-alerts')) {
    await redeliver(await bookkeeping.alertsDue(input));
    await deliver(await bookkeeping.reportUndeliveredAlerts(input));
  }
  return result;
}
