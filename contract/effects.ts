// What a job asks of an external channel: the requests its effects carry, one shape per channel.
// The job contract (schedules/job.ts) names them; the providers in activities/notify/ send them.

export interface EmailRequest {
  to: string[];
  subject: string;
  text: string;
  html?: string;
  /** `cid` makes an attachment an inline image, shown by `<img src="cid:...">` in the HTML. */
  attachments?: { filename: string; contentBase64: string; contentType: string; cid?: string }[];
}
/** A Slack message; with `ts` it replaces the message posted earlier (chat.update). */
export interface SlackRequest {
  channel: string;
  text: string;
  blocks?: unknown[];
  ts?: string;
}
export interface TelegramRequest {
  chatId: string;
  text: string;
}

/** A call to an HTTP API as an effect. */
/**
 * A header value kept out of the ledger: the worker reads it, when it sends, from the environment
 * variable TIDEMARK_SECRET_<secret> (redacted everywhere like every secret), after `prefix`.
 */
export interface SecretRef {
  secret: string;
  /** Written before the secret's value: 'Bearer ' for an Authorization header. */
  prefix?: string;
}

export interface HttpRequest {
  method: 'POST' | 'PUT' | 'PATCH';
  url: string;
  body: unknown;
  /**
   * Headers of the request. A credential goes as a SecretRef (`{ secret: 'SHOP_TOKEN', prefix:
   * 'Bearer ' }`): the request is stored with its window, and a secret's value never is.
   */
  headers?: Record<string, string | SecretRef>;
  /** GET here answers 200 when the request was applied, 404 when it was not. */
  statusUrl?: string;
  /** The target drops a repeated request with the same `Idempotency-Key`: a resend after a lost reply is safe. */
  honoursIdempotencyKey?: boolean;
}
