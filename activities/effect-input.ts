// Checks the effects a handler returned before they are recorded with its window: a mistake
// here is bad input (not retryable), refused inside the window's transaction so nothing commits.
import type { WindowEffect } from '../schedules/job.js';
import { FAILURE } from '../contract/failures.js';
import { badInput } from './errors.js';

const CHANNELS: readonly string[] = ['email', 'slack', 'telegram', 'http'];
const POLICIES: readonly string[] = ['ask', 'resend', 'skip'];
const METHODS: readonly string[] = ['POST', 'PUT', 'PATCH'];

function isHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string' || !URL.canParse(value)) return false;
  const { protocol } = new URL(value);
  return protocol === 'http:' || protocol === 'https:';
}

export function checkWindowEffects(job: string, windowKey: string, effects: readonly WindowEffect[]): void {
  const where = `job "${job}" window ${windowKey}`;
  const seen = new Set<string>();
  for (const e of effects) {
    // The name makes the key (`<window key>:<name>`): 1 and "1" would be one effect, one dropped.
    if (typeof e.name !== 'string' || e.name === '')
      throw badInput(
        FAILURE.badEffect,
        `${where}: an effect's name must be a non-empty string (got ${JSON.stringify(e.name)}); nothing was committed`,
      );
    if (!CHANNELS.includes(e.channel))
      throw badInput(
        FAILURE.badEffect,
        `${where}: effect "${e.name}": channel must be one of ${CHANNELS.join(', ')} (got ${JSON.stringify(e.channel)}); nothing was committed`,
      );
    // Effects are keyed `<window key>:<name>`: a second one of a name would be dropped silently.
    if (seen.has(e.name))
      throw badInput(
        FAILURE.badEffect,
        `${where}: two effects are named "${e.name}"; give each effect of a window its own name; nothing was committed`,
      );
    seen.add(e.name);
    const what = `${where}: effect "${e.name}"`;
    if (e.policy !== undefined && !POLICIES.includes(e.policy))
      throw badInput(
        FAILURE.badEffect,
        `${what}: policy must be one of ${POLICIES.join(', ')}; nothing was committed`,
      );
    if (typeof e.request !== 'object' || e.request === null || Array.isArray(e.request))
      throw badInput(FAILURE.badEffect, `${what}: request must be an object; nothing was committed`);
    // It is stored as JSON (the outbox): a BigInt or a cycle would fail the commit with a TypeError.
    try {
      JSON.stringify(e.request);
    } catch (err) {
      throw badInput(
        FAILURE.badEffect,
        `${what}: request must be plain JSON (${(err as Error).message}); nothing was committed`,
      );
    }
    if (e.channel === 'http') {
      const r = e.request as unknown as Record<string, unknown>;
      // A bad URL or method would fail only after the commit, as an outcome nobody can know.
      if (!isHttpUrl(r.url))
        throw badInput(
          FAILURE.badEffect,
          `${what}: request.url must be an absolute http(s) URL; nothing was committed`,
        );
      if (!METHODS.includes(r.method as string))
        throw badInput(
          FAILURE.badEffect,
          `${what}: request.method must be one of ${METHODS.join(', ')}; nothing was committed`,
        );
      if (r.honoursIdempotencyKey !== undefined && typeof r.honoursIdempotencyKey !== 'boolean')
        throw badInput(
          FAILURE.badEffect,
          `${where}: effect "${e.name}": request.honoursIdempotencyKey must be true or false (true only if the target drops a repeated Idempotency-Key); nothing was committed`,
        );
      if (r.statusUrl !== undefined && !isHttpUrl(r.statusUrl))
        throw badInput(
          FAILURE.badEffect,
          `${where}: effect "${e.name}": request.statusUrl must be an absolute http(s) URL; nothing was committed`,
        );
    }
  }
}
