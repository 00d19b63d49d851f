// The jobs' schedules as the page's overview shows them. Listed in one pass (one call for a thousand
// jobs) at most every 15 s; a job whose schedule a person changed from this page is
// described on its own for a while after, so its new state shows at once rather than when
// Temporal's visibility store has it.
import type { Client } from '@temporalio/client';
import { describeSchedules, listSchedules, type ScheduleState } from '../operator/overview.js';

/**
 * How old a listing of the schedules may be (a pause from the CLI shows within this). A listing of
 * 1,000 schedules costs the Temporal server about 450 ms of a core: every 15 s, 3% of a core.
 */
export const SCHEDULES_LISTED_MS = 15_000;
/** How long a schedule changed from the page is described on its own. */
const DESCRIBED_AFTER_CHANGE_MS = 15_000;

export function overviewSchedules(client: Client, jobs: readonly string[], clock = () => performance.now()) {
  let listed: { at: number; states: Promise<Map<string, ScheduleState | null>> } | null = null;
  const changed = new Map<string, number>();
  return {
    changed(job: string) {
      changed.set(job, clock() + DESCRIBED_AFTER_CHANGE_MS);
    },
    async read(): Promise<Map<string, ScheduleState | null>> {
      const t = clock();
      if (!listed || t - listed.at >= SCHEDULES_LISTED_MS) {
        const mine = { at: t, states: listSchedules(client, jobs) };
        listed = mine;
        // A failed listing is not kept: the next reading lists again.
        mine.states.catch(() => {
          if (listed === mine) listed = null;
        });
      }
      for (const [job, until] of changed) if (until <= t) changed.delete(job);
      const [states, exact] = await Promise.all([
        listed.states,
        describeSchedules(client, [...changed.keys()]),
      ]);
      return new Map([...states, ...exact]);
    },
  };
}
