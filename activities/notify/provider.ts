// What an external channel looks like to the effect guard, and how its failures are told apart.
import type { EmailRequest, HttpRequest, SlackRequest, TelegramRequest } from '../../contract/effects.js';

/**
 * How a failed effect attempt ended, as far as the caller can know:
 * - `not-sent`: the provider certainly did not act (refused connection, 4xx deferral, 429); retry is safe;
 * - `rejected`: the provider refused for good (5xx SMTP reply, invalid channel); retry cannot help;
 * - `unknown`: the request may have been acted on (a reply lost after sending, an HTTP 5xx or a
 *   gateway's 502/504: the server may have applied it before failing).
 */
export type FailureKind = 'not-sent' | 'rejected' | 'unknown';

export class EffectError extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'EffectError';
  }
}

/**
 * What bounds one provider call: the attempt's deadline, which falls inside its lease, so no
 * call is still sending when the lease passes and another attempt may act.
 */
export interface CallOptions {
  readonly signal?: AbortSignal;
  /** Milliseconds left before the deadline, for clients that take timeouts, not a signal. */
  timeLeftMs?(): number;
}

/** A call's own timeout, cut short by the caller's deadline where there is one. */
export function callSignal(timeoutMs: number, call?: CallOptions): AbortSignal {
  const own = AbortSignal.timeout(timeoutMs);
  return call?.signal ? AbortSignal.any([own, call.signal]) : own;
}

export interface Provider<Req = unknown> {
  readonly channel: string;
  /** True when the provider drops a repeated request with the same key, so a resend after an unknown outcome is safe. */
  idempotent(request: Req): boolean;
  /** Acts once; throws EffectError saying what is known when it fails. */
  perform(
    request: Req,
    providerKey: string,
    call?: CallOptions,
  ): Promise<{ providerId: string | null; result?: unknown }>;
  /** Asks the provider whether an earlier attempt took effect, where it can say. */
  check?(request: Req, providerKey: string, call?: CallOptions): Promise<'done' | 'absent' | 'cannot-tell'>;
  /** True when `check` can say for this request; then a lost reply is asked about before any resend. */
  canCheck?(request: Req): boolean;
}

/** The channels a worker can use; a channel missing here is not configured. */
export interface Channels {
  email?: Provider<EmailRequest>;
  slack?: Provider<SlackRequest>;
  telegram?: Provider<TelegramRequest>;
  http?: Provider<HttpRequest>;
}
