// watch: fired by its own schedule; measures every job's lag and alerts or clears.
import { deliver } from './alerts.js';
import { bookkeeping } from './policy.js';
import type { WatchResult } from '../activities/watch.js';

export async function watch(input: { now?: string } = {}): Promise<WatchResult> {
  const result = await bookkeeping.checkLag(input);
  await deliver(result.deliveries);
  return result;
}
