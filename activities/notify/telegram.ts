// Telegram messages through the Bot API (sendMessage). The token is part of the URL by the
// API's design; errors name the call, never the URL. No idempotency key exists for messages.
import type { TelegramRequest } from '../../contract/effects.js';
import { EffectError, type Provider } from './provider.js';
import { honourRateLimit, postJson, retryAfter } from './http.js';

export function telegramProvider(opts: {
  token: string;
  apiUrl: string;
  timeoutMs?: number;
  maxRateLimitWaitMs?: number;
}): Provider<TelegramRequest> {
  const url = `${opts.apiUrl.replace(/\/$/, '')}/bot${opts.token}/sendMessage`;
  return {
    channel: 'telegram',
    idempotent: () => false,
    async perform(request, _providerKey, call) {
      const what = `telegram sendMessage to ${request.chatId}`;
      return await honourRateLimit<{ providerId: string | null }>(
        async () => {
          const reply = await postJson(
            url,
            { chat_id: request.chatId, text: request.text, disable_web_page_preview: true },
            { what, timeoutMs: opts.timeoutMs ?? 15_000, signal: call?.signal },
          );
          if (reply.status === 429) {
            const parameters = reply.body.parameters as { retry_after?: unknown } | undefined;
            return { rateLimitedMs: retryAfter(parameters?.retry_after) ?? reply.retryAfterMs ?? 1_000 };
          }
          // A 5xx (or a gateway's 502/504) may come after Telegram sent the message.
          if (reply.status >= 500) throw new EffectError('unknown', `${what}: HTTP ${reply.status}`);
          if (reply.body.ok === true) {
            const result = reply.body.result as { message_id?: unknown } | undefined;
            return { providerId: result?.message_id === undefined ? null : String(result.message_id) };
          }
          throw new EffectError(
            'rejected',
            `${what}: ${String(reply.body.description ?? `HTTP ${reply.status}`)}`,
          );
        },
        { maxWaitMs: opts.maxRateLimitWaitMs ?? 30_000, what, signal: call?.signal },
      );
    },
  };
}
