// JSON over HTTP for chat providers, with failures classified for the effect guard:
// refused connection = not sent; a reply lost after the request went out = unknown.
import { callSignal, EffectError } from './provider.js';

export interface JsonReply {
  status: number;
  body: Record<string, unknown>;
  retryAfterMs: number | undefined;
}

const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

function causeCode(err: unknown): string | undefined {
  for (let e: unknown = err; e; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** A fetch that threw: a connection that never opened was not sent; anything later is unknown. */
export function fetchFailure(err: unknown, what: string): EffectError {
  const code = causeCode(err);
  if (code && NOT_SENT_CODES.has(code))
    return new EffectError('not-sent', `${what}: connection failed (${code})`);
  return new EffectError(
    'unknown',
    `${what}: no reply (${code ?? (err as Error).name}); the request may have been received`,
  );
}

/** Seconds in a Retry-After header (or a body field) as milliseconds. */
export function retryAfter(seconds: unknown): number | undefined {
  const n = typeof seconds === 'string' ? Number(seconds) : seconds;
  return typeof n === 'number' && Number.isFinite(n) && n >= 0 ? Math.ceil(n * 1000) : undefined;
}

/** POSTs JSON; `what` names the call in errors (never the URL, which may carry a token). */
export async function postJson(
  url: string,
  body: unknown,
  opts: {
    what: string;
    headers?: Record<string, string>;
    timeoutMs: number;
    signal?: AbortSignal | undefined;
  },
): Promise<JsonReply> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8', ...opts.headers },
      body: JSON.stringify(body),
      signal: callSignal(opts.timeoutMs, opts),
    });
  } catch (err) {
    throw fetchFailure(err, opts.what);
  }
  let parsed: Record<string, unknown> = {};
  try {
    parsed = (await response.json()) as Record<string, unknown>;
  } catch {
    if (response.ok)
      throw new EffectError('unknown', `${opts.what}: HTTP ${response.status} with a body that is not JSON`);
  }
  return {
    status: response.status,
    body: parsed,
    retryAfterMs: retryAfter(response.headers.get('retry-after') ?? undefined),
  };
}

/** Waits out a 429 in place when it is short, so a rate limit costs no retry; longer ones go back to Temporal. */
export async function honourRateLimit<T>(
  call: () => Promise<T | { rateLimitedMs: number }>,
  opts: { maxWaitMs: number; what: string; signal?: AbortSignal | undefined },
): Promise<T> {
  for (let waited = 0; ;) {
    const result = await call();
    if (typeof result !== 'object' || result === null || !('rateLimitedMs' in result)) return result as T;
    const ms = result.rateLimitedMs;
    if (waited + ms > opts.maxWaitMs)
      throw new EffectError('not-sent', `${opts.what}: rate limited, retry after ${ms} ms`, ms);
    // The wait ends early at the attempt's deadline: nothing is sent after it, the next attempt retries.
    await new Promise<void>((r) => {
      const timer = setTimeout(r, ms);
      opts.signal?.addEventListener('abort', () => (clearTimeout(timer), r()), { once: true });
    });
    if (opts.signal?.aborted)
      throw new EffectError('not-sent', `${opts.what}: rate limited past the attempt's deadline`, ms);
    waited += ms;
  }
}
