// Alerting from a process that is not a workflow (npm start, the CLI, schedule sync): the
// same incidents and guarded deliveries, performed in this process.
import { alerting, type RaiseInput } from './alerts.js';
import type { ActivityDeps } from './deps.js';
import { effectActivities } from './effects.js';

/**
 * Performs deliveries here; a failed one is logged and stays recorded on its effect row. A
 * delivery found sent twice hands back its finding's own alert, delivered here too.
 */
export async function deliverNow(deps: ActivityDeps, keys: readonly string[]): Promise<void> {
  const { performEffect } = effectActivities(deps);
  for (const key of keys) {
    const result = await performEffect({ key }).catch((err: unknown) =>
      deps.logger.error(`ALERT delivery ${key} failed: ${(err as Error).message}`),
    );
    if (result?.alerts) await deliverNow(deps, result.alerts);
  }
}

export async function raiseNow(deps: ActivityDeps, input: RaiseInput): Promise<void> {
  const { deliveries } = await alerting(deps).activities.raiseIncident(input);
  await deliverNow(deps, deliveries);
}

export async function resolveNow(
  deps: ActivityDeps,
  input: { job: string; subject: string; note: string },
): Promise<void> {
  const closed = await alerting(deps).resolve(deps.db, input);
  await deliverNow(deps, closed?.deliveries ?? []);
}
