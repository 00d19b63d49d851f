// Deps with real channels pointed at loopback servers, and readers of what happened.
import { after, before } from 'node:test';
import type { Kysely } from 'kysely';
import type { ActivityDeps } from '../../activities/deps.js';
import { memoryLogger } from '../../activities/logger.js';
import { emailProvider } from '../../activities/notify/email.js';
import { redactor } from '../../workers/channels.js';
import { slackProvider } from '../../activities/notify/slack.js';
import { telegramProvider } from '../../activities/notify/telegram.js';
import type { EmailRequest } from '../../contract/effects.js';
import type { Database } from '../../db/schema.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import type { Catalog, WindowContext, WindowHandler } from '../../schedules/job.js';
import { startChat, type TestChat } from './chat.js';
import { startSmtp, type TestSmtp } from './smtp.js';

/**
 * A test file's loopback SMTP and chat servers, started before its tests and closed after them;
 * read them in the tests (they are set once the file's before hook has run).
 */
export function loopbackChannels(): { readonly smtp: TestSmtp; readonly chat: TestChat } {
  const channels = {} as { smtp: TestSmtp; chat: TestChat };
  before(async () => {
    [channels.smtp, channels.chat] = await Promise.all([startSmtp(), startChat()]);
  });
  after(async () => {
    await Promise.all([channels.smtp?.close(), channels.chat?.close()]);
  });
  return channels;
}

export interface ChannelSecrets {
  smtpUser?: string;
  smtpPassword?: string;
  slackToken: string;
  telegramToken: string;
}

export function depsWithChannels(
  db: Kysely<Database>,
  catalog: Catalog,
  smtp: TestSmtp,
  chat: TestChat,
  opts: { secrets?: ChannelSecrets; slackUrl?: string; telegramUrl?: string } = {},
): ActivityDeps & { logger: ReturnType<typeof memoryLogger> } {
  const secrets = opts.secrets ?? {
    smtpUser: 'tidemark',
    smtpPassword: 'test-password',
    slackToken: 'xoxb-test',
    telegramToken: '123:test',
  };
  return {
    db,
    catalog,
    logger: memoryLogger(),
    now: () => new Date(),
    channels: {
      email: emailProvider({
        host: '127.0.0.1',
        port: smtp.port,
        secure: false,
        rejectUnauthorized: false,
        user: secrets.smtpUser,
        password: secrets.smtpPassword,
        from: 'tidemark <tidemark@test>',
        socketTimeoutMs: 5_000,
      }),
      slack: slackProvider({ token: secrets.slackToken, apiUrl: opts.slackUrl ?? chat.slackUrl }),
      telegram: telegramProvider({
        token: secrets.telegramToken,
        apiUrl: opts.telegramUrl ?? chat.telegramUrl,
      }),
    },
    redact: redactor(
      [secrets.smtpPassword, secrets.slackToken, secrets.telegramToken].filter((s): s is string => !!s),
    ),
    webUi: { url: 'http://127.0.0.1:8233', namespace: 'default' },
  };
}

export async function effectRow(db: Kysely<Database>, key: string) {
  return await db.selectFrom('effects').selectAll().where('effect_key', '=', key).executeTakeFirstOrThrow();
}

export async function attemptOutcomes(db: Kysely<Database>, key: string): Promise<string[]> {
  const rows = await db
    .selectFrom('effect_attempts')
    .select('outcome')
    .where('effect_key', '=', key)
    .orderBy('id')
    .execute();
  return rows.map((r) => r.outcome);
}

/** The text of every chat message to one API. */
export const chatTexts = (chat: TestChat, api: 'slack' | 'telegram'): string[] =>
  chat.messages.filter((m) => m.api === api).map((m) => m.text);

/** Every attempt recorded for the effect, all columns, oldest first. */
export async function effectAttempts(db: Kysely<Database>, key: string) {
  return await db
    .selectFrom('effect_attempts')
    .selectAll()
    .where('effect_key', '=', key)
    .orderBy('id')
    .execute();
}

/** A window run's policy for effect tests: three quick attempts, effects given 10 s. */
export const effectRunPolicy = {
  retry: { maximumAttempts: 3, initialInterval: '100ms', maximumInterval: '200ms', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 20_000,
  effectTimeoutMs: 10_000,
};

/**
 * The sales summary plus one e-mail named 'report' to ops per window. `request` adds to or replaces
 * the e-mail's fields (subject, text, html, attachments) from the window and its applied count.
 */
export const summaryWithMail =
  (request: (ctx: WindowContext, applied: number) => Partial<EmailRequest> = () => ({})): WindowHandler =>
  async (ctx) => {
    const counts = await summariseWindow(ctx);
    return {
      ...counts,
      effects: [
        {
          name: 'report',
          channel: 'email',
          request: {
            to: ['ops@example.test'],
            subject: `report ${ctx.key}`,
            text: `orders: ${counts.applied}`,
            ...request(ctx, counts.applied),
          },
        },
      ],
    };
  };
