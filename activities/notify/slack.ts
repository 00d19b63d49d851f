// Slack messages through the Web API (chat.postMessage). The base URL is configurable so tests
// run it against a real HTTP server on loopback. Slack has no idempotency key for messages.
import type { SlackRequest } from '../../contract/effects.js';
import { EffectError, type Provider } from './provider.js';
import { honourRateLimit, postJson } from './http.js';

/** Slack errors after which the message may have been posted. */
const IN_DOUBT = new Set(['internal_error', 'fatal_error']);

export function slackProvider(opts: {
  token: string;
  apiUrl: string;
  timeoutMs?: number;
  maxRateLimitWaitMs?: number;
}): Provider<SlackRequest> {
  const base = opts.apiUrl.replace(/\/$/, '');
  return {
    channel: 'slack',
    idempotent: () => false,
    async perform(request, _providerKey, call) {
      const method = request.ts ? 'chat.update' : 'chat.postMessage';
      const what = `slack ${method} to ${request.channel}`;
      const body = {
        channel: request.channel,
        text: request.text,
        ...(request.blocks ? { blocks: request.blocks } : {}),
        ...(request.ts ? { ts: request.ts } : { unfurl_links: false }),
      };
      return await honourRateLimit<{ providerId: string | null }>(
        async () => {
          const reply = await postJson(`${base}/${method}`, body, {
            what,
            headers: { authorization: `Bearer ${opts.token}` },
            timeoutMs: opts.timeoutMs ?? 15_000,
            signal: call?.signal,
          });
          if (reply.status === 429) return { rateLimitedMs: reply.retryAfterMs ?? 1_000 };
          // A 5xx (or a gateway's 502/504) may come after Slack posted the message.
          if (reply.status >= 500) throw new EffectError('unknown', `${what}: HTTP ${reply.status}`);
          if (reply.body.ok === true)
            return { providerId: typeof reply.body.ts === 'string' ? reply.body.ts : null };
          const error = typeof reply.body.error === 'string' ? reply.body.error : `HTTP ${reply.status}`;
          if (error === 'ratelimited') return { rateLimitedMs: reply.retryAfterMs ?? 1_000 };
          // Slack: "it's possible some aspect of the operation succeeded before the error was raised".
          if (IN_DOUBT.has(error)) throw new EffectError('unknown', `${what}: ${error}`);
          throw new EffectError('rejected', `${what}: ${error}`);
        },
        { maxWaitMs: opts.maxRateLimitWaitMs ?? 30_000, what, signal: call?.signal },
      );
    },
  };
}
