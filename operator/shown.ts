// What the page shows of texts written by others (a provider's error or reply, an incident's
// error): every URL cut to its origin. Errors are redacted of the configured secrets when recorded,
// but a webhook's secret is its path or query (Slack, Discord), no configured value, and a
// provider's 4xx answer may quote the URL it was called on.
const URL_PATH = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/?#"'<>\\]+)[/?#][^\s"'<>\\]*/gi;

/** `text` with each URL's path, query and fragment replaced by `/…`. */
export function urlsAsOrigins(text: string): string;
export function urlsAsOrigins(text: string | null): string | null;
export function urlsAsOrigins(text: string | null): string | null {
  return text === null ? null : text.replace(URL_PATH, '$1/…');
}

/** A recorded JSON value (a provider's reply) with the URLs in its strings cut to their origin. */
export function urlsAsOriginsIn(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  // The pattern stops at a quote or backslash, so the JSON stays valid.
  return JSON.parse(urlsAsOrigins(JSON.stringify(value))) as unknown;
}
