// Builds the configured channels and the secret redactor from the parsed configuration.
import { secretsOf, type Config } from '../config/env.js';
import { emailProvider } from '../activities/notify/email.js';
import { httpApiProvider } from '../activities/notify/http-api.js';
import type { Channels } from '../activities/notify/provider.js';
import { slackProvider } from '../activities/notify/slack.js';
import { telegramProvider } from '../activities/notify/telegram.js';

export function channelsFromConfig(config: Config): Channels {
  return {
    http: httpApiProvider({ secret: (name) => config.effectSecrets[name] }),
    ...(config.SMTP_HOST
      ? {
          email: emailProvider({
            host: config.SMTP_HOST,
            port: config.SMTP_PORT,
            secure: config.SMTP_SECURE,
            rejectUnauthorized: config.SMTP_TLS_REJECT_UNAUTHORIZED,
            user: config.SMTP_USER,
            password: config.SMTP_PASSWORD,
            from: config.SMTP_FROM,
          }),
        }
      : {}),
    ...(config.SLACK_BOT_TOKEN
      ? { slack: slackProvider({ token: config.SLACK_BOT_TOKEN, apiUrl: config.SLACK_API_URL }) }
      : {}),
    ...(config.TELEGRAM_BOT_TOKEN
      ? { telegram: telegramProvider({ token: config.TELEGRAM_BOT_TOKEN, apiUrl: config.TELEGRAM_API_URL }) }
      : {}),
  };
}

/** The password of a URL (scheme://user:password@host), configured as a secret or not. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi;
/** A password in a URL's query (postgres://u@h/db?password=..., libpq and node-postgres take it). */
const QUERY_PASSWORD = /([?&](?:ssl)?password=)[^&\s#'"]+/gi;

/**
 * Replaces every secret value (and its URL-encoded form) with "***", and the password of any URL
 * (a source database's, a webhook's): what the logs hide must not reach a history or a span either.
 */
export function redactor(secrets: readonly string[]): (text: string) => string {
  const needles = [...new Set(secrets.flatMap((s) => [s, encodeURIComponent(s)]))]
    .filter((s) => s.length >= 4)
    .sort((a, b) => b.length - a.length);
  return (text) =>
    needles
      .reduce((t, s) => t.split(s).join('***'), text)
      .replace(URL_PASSWORD, '$1***@')
      .replace(QUERY_PASSWORD, '$1***');
}

export function redactorFromConfig(config: Config): (text: string) => string {
  return redactor(secretsOf(config));
}
