// Generic HTTP API calls as effects. Every request carries `Idempotency-Key: <effect key>`, but
// only a target declared to honour it (`honoursIdempotencyKey`) is resent after a lost reply;
// a plain webhook would act twice, so its unknown outcome follows the effect's policy. Where the
// API can say what happened (`statusUrl`), the guard asks it before acting again.
import { fetchFailure, retryAfter } from './http.js';
import type { HttpRequest } from '../../contract/effects.js';
import { callSignal, EffectError, type CallOptions, type Provider } from './provider.js';

/** What a header's value may hold: tabs and visible Latin-1 (RFC 9110 field-value), spaces inside. */
export const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** The request's headers with each secret read now (TIDEMARK_SECRET_<name>); a missing one refuses the send. */
function headersOf(
  request: HttpRequest,
  what: string,
  secret: (name: string) => string | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    if (typeof value === 'string') {
      out[name] = value;
      continue;
    }
    const found = secret(value.secret);
    if (found === undefined || found === '')
      throw new EffectError(
        'rejected',
        `${what}: header ${name} needs the secret ${value.secret}, and TIDEMARK_SECRET_${value.secret} is not set on this worker: set it and retry the effect (tidemark effects retry)`,
      );
    // A header carries visible Latin-1 and tabs: anything else fetch refuses before sending, which
    // would read as a lost reply. Certainly not sent: rejected, naming the variable (not its value).
    if (!HEADER_VALUE.test(found))
      throw new EffectError(
        'rejected',
        `${what}: header ${name}: TIDEMARK_SECRET_${value.secret} holds a character a header cannot carry (a line break, a control character, or one outside Latin-1): fix its value and retry the effect (tidemark effects retry)`,
      );
    out[name] = `${value.prefix ?? ''}${found}`;
  }
  return out;
}

export function httpApiProvider(
  opts: {
    timeoutMs?: number;
    headers?: Record<string, string>;
    /** A secret's value by its name (TIDEMARK_SECRET_<name>, from the worker's configuration). */
    secret?: (name: string) => string | undefined;
  } = {},
): Provider<HttpRequest> & {
  check(
    request: HttpRequest,
    providerKey?: string,
    call?: CallOptions,
  ): Promise<'done' | 'absent' | 'cannot-tell'>;
} {
  return {
    channel: 'http',
    idempotent: (request) => request.honoursIdempotencyKey === true,
    canCheck: (request) => typeof request.statusUrl === 'string',
    async perform(request, providerKey, call) {
      // The origin only: a webhook's path (Slack, Discord) or query often is its secret.
      const what = `${request.method} ${new URL(request.url).origin}`;
      const headers = headersOf(request, what, opts.secret ?? (() => undefined));
      let response: Response;
      try {
        response = await fetch(request.url, {
          method: request.method,
          headers: {
            'content-type': 'application/json',
            'idempotency-key': providerKey,
            ...opts.headers,
            ...headers,
          },
          body: JSON.stringify(request.body),
          signal: callSignal(opts.timeoutMs ?? 15_000, call),
        });
      } catch (err) {
        throw fetchFailure(err, what);
      }
      const text = await response.text().catch(() => '');
      if (response.status === 429)
        throw new EffectError(
          'not-sent',
          `${what}: rate limited`,
          retryAfter(response.headers.get('retry-after') ?? undefined),
        );
      if (response.status >= 500) throw new EffectError('unknown', `${what}: HTTP ${response.status}`);
      if (response.status >= 400)
        throw new EffectError('rejected', `${what}: HTTP ${response.status} ${text.slice(0, 200)}`);
      let result: unknown;
      try {
        result = text ? JSON.parse(text) : undefined;
      } catch {
        result = undefined;
      }
      return { providerId: response.headers.get('x-request-id') ?? `${response.status}`, result };
    },
    async check(request, _providerKey, call) {
      if (!request.statusUrl) return 'cannot-tell';
      try {
        const r = await fetch(request.statusUrl, { signal: callSignal(opts.timeoutMs ?? 15_000, call) });
        if (r.status === 200) return 'done';
        if (r.status === 404) return 'absent';
      } catch {
        // fall through: the API cannot say now
      }
      return 'cannot-tell';
    },
  };
}
