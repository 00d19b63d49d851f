// createActivities: every activity of the worker, built from injected dependencies.
import type { ActivityDeps } from './deps.js';
import { alertOutboxActivities } from './alert-outbox.js';
import { alertActivities } from './alerts.js';
import { batchActivities } from './batch.js';
import { effectActivities } from './effects.js';
import { planActivities } from './plan.js';
import { rerunActivities } from './rerun.js';
import { watchActivities } from './watch.js';
import { windowActivities } from './window.js';

export function createActivities(deps: ActivityDeps) {
  return {
    ...planActivities(deps),
    ...windowActivities(deps),
    ...batchActivities(deps),
    ...effectActivities(deps),
    ...alertActivities(deps),
    ...alertOutboxActivities(deps),
    ...watchActivities(deps),
    ...rerunActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
export type { ActivityDeps } from './deps.js';
