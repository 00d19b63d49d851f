// Checks the effects a handler returned before they are recorded with its window: a mistake
// here is bad input (not retryable), refused inside the window's transaction so nothing commits.
import type { WindowEffect } from '../schedules/job.js';
import { FAILURE, badInput } from './errors.js';

export function checkWindowEffects(job: string, windowKey: string, effects: readonly WindowEffect[]): void {
  const where = `job "${job}" window ${windowKey}`;
  const seen = new Set<string>();
  for (const e of effects) {
    // Effects are keyed `<window key>:<name>`: a second one of a name would be dropped silently.
    if (seen.has(e.name))
      throw badInput(
        FAILURE.badEffect,
        `${where}: two effects are named "${e.name}"; give each effect of a window its own name; nothing was committed`,
      );
    seen.add(e.name);
    if (e.channel === 'http') {
      const r = e.request as unknown as Record<string, unknown>;
      if (r.honoursIdempotencyKey !== undefined && typeof r.honoursIdempotencyKey !== 'boolean')
        throw badInput(
          FAILURE.badEffect,
          `${where}: effect "${e.name}": request.honoursIdempotencyKey must be true or false (true only if the target drops a repeated Idempotency-Key); nothing was committed`,
        );
      if (r.statusUrl !== undefined && (typeof r.statusUrl !== 'string' || !URL.canParse(r.statusUrl)))
        throw badInput(
          FAILURE.badEffect,
          `${where}: effect "${e.name}": request.statusUrl must be an absolute URL; nothing was committed`,
        );
    }
  }
}
