// createActivities: every activity of the worker, built from injected dependencies.
import type { ActivityDeps } from './deps.js';
import { planActivities } from './plan.js';
import { windowActivities } from './window.js';

export function createActivities(deps: ActivityDeps) {
  return { ...planActivities(deps), ...windowActivities(deps) };
}

export type Activities = ReturnType<typeof createActivities>;
export type { ActivityDeps } from './deps.js';
