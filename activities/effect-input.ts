// Checks the effects a handler returned before they are recorded with its window: a mistake
// here is bad input (not retryable), refused inside the window's transaction so nothing commits.
import type { WindowEffect } from '../schedules/job.js';
import type { RetryPolicyDto } from '../contract/workflows.js';
import { FAILURE } from '../contract/failures.js';
import { badInput } from './errors.js';
import { parseDuration } from '../schedules/duration.js';
import { HEADER_VALUE } from './notify/http-api.js';

const CHANNELS: readonly string[] = ['email', 'slack', 'telegram', 'http'];
const POLICIES: readonly string[] = ['ask', 'resend', 'skip'];
const METHODS: readonly string[] = ['POST', 'PUT', 'PATCH'];

function isHttpUrl(value: unknown): boolean {
  if (typeof value !== 'string' || !URL.canParse(value)) return false;
  const { protocol } = new URL(value);
  return protocol === 'http:' || protocol === 'https:';
}

/** Header names whose value is a credential: refused as plain text (it would be stored with the window). */
const CREDENTIAL_HEADER =
  /auth|token|key|secret|cookie|pass|pwd|credential|signature|session|jwt|hmac|bearer|(^|[-_])sig([-_]|$)/i;
/** Headers the HTTP client sets itself (fetch refuses them, or the request would be malformed). */
const CLIENT_HEADERS: readonly string[] = [
  'connection',
  'content-length',
  'expect',
  'host',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
];
const SECRET_NAME = /^[A-Z][A-Z0-9_]{0,63}$/;
const HEADER_NAME = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/;

function checkHeaders(what: string, headers: unknown): void {
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers))
    throw badInput(
      FAILURE.badEffect,
      `${what}: request.headers must be an object of header values; nothing was committed`,
    );
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name))
      throw badInput(
        FAILURE.badEffect,
        `${what}: request.headers: ${JSON.stringify(name)} is not a header name; nothing was committed`,
      );
    if (CLIENT_HEADERS.includes(name.toLowerCase()))
      throw badInput(
        FAILURE.badEffect,
        `${what}: request.headers.${name} is set by the HTTP client, not by an effect; nothing was committed`,
      );
    const unsendable = () =>
      badInput(
        FAILURE.badEffect,
        `${what}: request.headers.${name} holds a character a header cannot carry (a line break, a control character, or one outside Latin-1); nothing was committed`,
      );
    if (typeof value === 'string') {
      if (CREDENTIAL_HEADER.test(name))
        throw badInput(
          FAILURE.badEffect,
          `${what}: request.headers.${name} looks like a credential and would be stored with the window: give it as { secret: 'NAME', prefix: 'Bearer ' } and set TIDEMARK_SECRET_NAME on the workers; nothing was committed`,
        );
      if (!HEADER_VALUE.test(value)) throw unsendable();
      continue;
    }
    const ref = value as { secret?: unknown; prefix?: unknown } | null;
    if (
      typeof ref !== 'object' ||
      ref === null ||
      typeof ref.secret !== 'string' ||
      !SECRET_NAME.test(ref.secret) ||
      (ref.prefix !== undefined && typeof ref.prefix !== 'string') ||
      Object.keys(ref).some((k) => k !== 'secret' && k !== 'prefix')
    )
      throw badInput(
        FAILURE.badEffect,
        `${what}: request.headers.${name} must be a string or { secret: 'NAME', prefix?: '...' } (NAME in capitals, digits and _; read from TIDEMARK_SECRET_NAME); nothing was committed`,
      );
    if (ref.prefix !== undefined && !HEADER_VALUE.test(ref.prefix as string)) throw unsendable();
  }
}

/** A retry interval: a whole number above zero of one unit, as parseDuration and Temporal both read it. */
const RETRY_INTERVAL = /^[1-9][0-9]{0,8}(ms|s|m|h|d)$/;
const RETRY_FIELDS: readonly string[] = [
  'maximumAttempts',
  'initialInterval',
  'maximumInterval',
  'backoffCoefficient',
];

/** An effect's own retry policy: what it says is checked as a job's `retry` is when the job is defined. */
function checkRetry(what: string, retry: unknown, base: RetryPolicyDto): void {
  const refuse = (detail: string) => badInput(FAILURE.badEffect, `${what}: ${detail}; nothing was committed`);
  if (typeof retry !== 'object' || retry === null || Array.isArray(retry))
    throw refuse('retry must be an object such as { maximumAttempts: 3, initialInterval: "10s" }');
  const r = retry as Record<string, unknown>;
  for (const field of Object.keys(r))
    if (!RETRY_FIELDS.includes(field))
      throw refuse(`retry.${field} is not a retry setting (${RETRY_FIELDS.join(', ')})`);
  const got = (v: unknown) => (typeof v === 'number' ? String(v) : JSON.stringify(v));
  const attempts = r.maximumAttempts;
  if (
    attempts !== undefined &&
    (!Number.isInteger(attempts) || (attempts as number) < 1 || (attempts as number) > 100)
  )
    throw refuse(`retry.maximumAttempts must be a whole number from 1 to 100 (got ${got(attempts)})`);
  for (const field of ['initialInterval', 'maximumInterval'] as const) {
    const v = r[field];
    // As Temporal reads it after the commit: no spaces, more than zero.
    if (v !== undefined && (typeof v !== 'string' || !RETRY_INTERVAL.test(v)))
      throw refuse(
        `retry.${field} must be a duration such as "500ms", "10s" or "5m", more than zero (got ${got(v)})`,
      );
  }
  const c = r.backoffCoefficient;
  if (c !== undefined && (typeof c !== 'number' || !Number.isFinite(c) || c < 1 || c > 100))
    throw refuse(`retry.backoffCoefficient must be a number from 1 to 100 (got ${got(c)})`);
  const merged = effectRetryOf(base, r);
  if (parseDuration(merged.maximumInterval)! < parseDuration(merged.initialInterval)!)
    throw refuse(
      `retry.maximumInterval must not be shorter than retry.initialInterval (${merged.maximumInterval}${r.maximumInterval === undefined ? ", the job's" : ''} < ${merged.initialInterval}${r.initialInterval === undefined ? ", the job's" : ''})`,
    );
}

/** The policy an effect's attempts retry by: its own retry settings over the window's. */
export function effectRetryOf(base: RetryPolicyDto, retry: Partial<RetryPolicyDto>): RetryPolicyDto {
  return {
    maximumAttempts: retry.maximumAttempts ?? base.maximumAttempts,
    initialInterval: retry.initialInterval ?? base.initialInterval,
    maximumInterval: retry.maximumInterval ?? base.maximumInterval,
    backoffCoefficient: retry.backoffCoefficient ?? base.backoffCoefficient,
  };
}

export function checkWindowEffects(
  job: string,
  windowKey: string,
  effects: readonly WindowEffect[],
  retry: RetryPolicyDto,
): void {
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
    if (e.retry !== undefined) checkRetry(what, e.retry, retry);
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
      if (r.headers !== undefined) checkHeaders(what, r.headers);
      if (r.statusUrl !== undefined && !isHttpUrl(r.statusUrl))
        throw badInput(
          FAILURE.badEffect,
          `${where}: effect "${e.name}": request.statusUrl must be an absolute http(s) URL; nothing was committed`,
        );
    }
  }
}
