// No silent failure: a failure opens an incident and alerts the job's channels once; its end
// closes the incident and sends one recovery notice. Each delivery is an effect, so a retried
// alert is not sent twice, and a channel that is down does not keep the others from hearing.
import type { Kysely, Transaction } from 'kysely';
import {
  closeIncident,
  openIncident,
  recordEffects,
  type IncidentRow,
  type NewEffect,
} from '../db/effects.js';
import { windowAttemptsOf } from '../db/ledger.js';
import { undeliveredAlerts } from '../db/notices.js';
import type { Database } from '../db/schema.js';
import type { Job } from '../schedules/job.js';
import type { ActivityDeps } from './deps.js';
import type { EmailRequest, SlackRequest, TelegramRequest } from '../contract/effects.js';
import { slackEscape } from '../contract/slack-text.js';
import { nextSteps, pageLink, runbookRef, type LagSituation } from '../contract/next-steps.js';

export const INCIDENT_KIND = Object.freeze({
  windowFailed: 'window-failed',
  tickFailed: 'tick-failed',
  syncFailed: 'schedule-sync-failed',
  effectUnknown: 'effect-unknown',
  effectFailed: 'effect-failed',
  lag: 'lag',
  finding: 'finding',
  settleFailed: 'settle-failed',
  alertUndelivered: 'alert-undelivered',
  drillFailed: 'restore-drill-failed',
} as const);
export type IncidentKind = (typeof INCIDENT_KIND)[keyof typeof INCIDENT_KIND];

export interface RaiseInput {
  readonly job: string;
  /** What failed: a window key, "tick", "schedules", "lag", an effect key. One open incident per subject. */
  readonly subject: string;
  readonly kind: IncidentKind;
  readonly error: string;
  readonly attempts?: number;
  readonly workflowId?: string;
  readonly runId?: string;
  /** Lines of what is known beyond the error (a lag's catch-up estimate), printed before the next steps. */
  readonly notes?: readonly string[];
  /** A lag's diagnosis, so its next steps name only the fixes that apply. */
  readonly lag?: LagSituation;
}

export interface AlertDeliveries {
  readonly incidentId: string;
  /** Effect keys of the alert deliveries to perform (empty when nothing new needs saying). */
  readonly deliveries: readonly string[];
}

const TITLES: Record<IncidentKind, string> = {
  'window-failed': 'window failed',
  'tick-failed': 'tick failed',
  'schedule-sync-failed': 'schedule sync failed',
  'effect-unknown': 'effect outcome unknown',
  'effect-failed': 'effect failed',
  lag: 'falling behind',
  finding: 'needs attention',
  'settle-failed': 'settle failed',
  'alert-undelivered': 'alerts undelivered',
  'restore-drill-failed': 'restore drill failed',
};

/** A line of an alert: text, or a labelled link (Slack gets it as its own link markup). */
type AlertLine = string | { readonly label: string; readonly url: string };

/** Slack's link markup `<url>`: the URL's own &, <, > and | cannot end it or add a label. */
const slackLink = (url: string): string =>
  `<${url.replace(/&/g, '&amp;').replace(/</g, '%3C').replace(/>/g, '%3E').replace(/\|/g, '%7C')}>`;

/** An alert's lines as plain text (e-mail, Telegram) and as Slack mrkdwn (the text escaped, the links markup). */
function render(lines: readonly AlertLine[]): { plain: string; slack: string } {
  return {
    plain: lines.map((l) => (typeof l === 'string' ? l : `${l.label}${l.url}`)).join('\n'),
    slack: lines
      .map((l) => (typeof l === 'string' ? slackEscape(l) : `${slackEscape(l.label)}${slackLink(l.url)}`))
      .join('\n'),
  };
}

/** The alert deliveries of an incident event: `alert:<incident>:<event>:`. */
export const alertKeyPrefix = (incidentId: string, event: 'opened' | 'closed'): string =>
  `alert:${incidentId}:${event}:`;

/** A channel and target that alerts cannot reach, left out of the alert that reports it. */
export interface AlertTarget {
  readonly channel: string;
  readonly target: string;
}

/** Slack refuses a section whose text is longer than this. */
const SECTION_MAX = 3000;

/** Telegram refuses a message longer than this (400, not retried): the alert would be lost. */
const MAX_TELEGRAM_TEXT = 4096;

/** Any alert within Telegram's limit (a recovery notice's last error may be long too). */
const fitTelegram = (text: string): string =>
  text.length <= MAX_TELEGRAM_TEXT ? text : `${text.slice(0, MAX_TELEGRAM_TEXT - 1)}…`;

/** Slack mrkdwn cut anywhere, less an escaped character (`&amp;`) or a link (`<url>`) it cut in two. */
function whole(cut: string): string {
  const open = cut.lastIndexOf('<');
  const unclosed = open > cut.lastIndexOf('>') ? cut.slice(0, open) : cut;
  return unclosed.replace(/&[a-z]*$/, '');
}

/** An alert about an effect in doubt, with the buttons that decide it (handled by the Slack app). */
function decisionBlocks(text: string, effectKey: string): unknown[] {
  // Cut at a line's end, so no entity or link is cut in two; the message's text keeps it all.
  const cut = text.lastIndexOf('\n', SECTION_MAX - 2);
  const fits =
    text.length <= SECTION_MAX ? text : `${whole(text.slice(0, cut > 0 ? cut : SECTION_MAX - 2))}\n…`;
  return [
    { type: 'section', text: { type: 'mrkdwn', text: fits } },
    {
      type: 'actions',
      block_id: 'effect',
      elements: [
        {
          type: 'button',
          action_id: 'effect_resend',
          style: 'primary',
          text: { type: 'plain_text', text: 'Resend' },
          value: effectKey,
        },
        {
          type: 'button',
          action_id: 'effect_skip',
          text: { type: 'plain_text', text: 'Skip' },
          value: effectKey,
        },
      ],
    },
  ];
}

export function alerting(deps: ActivityDeps) {
  const { db, logger } = deps;
  const redact = deps.redact ?? ((s: string) => s);

  function targets(jobName: string) {
    const job: Job | undefined = deps.catalog.has(jobName) ? deps.catalog.get(jobName) : undefined;
    const own = job?.alerts;
    const defaults = deps.alertDefaults ?? { email: [], slack: [], telegram: [] };
    const pick = (a: readonly string[] | undefined, b: readonly string[]) => (a && a.length > 0 ? a : b);
    return {
      email: pick(own?.email, defaults.email),
      slack: pick(own?.slack, defaults.slack),
      telegram: pick(own?.telegram, defaults.telegram),
    };
  }

  function runLink(workflowId?: string, runId?: string): string | null {
    if (!workflowId || !deps.webUi) return null;
    const base = `${deps.webUi.url.replace(/\/$/, '')}/namespaces/${encodeURIComponent(deps.webUi.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
    return runId ? `${base}/${encodeURIComponent(runId)}/history` : base;
  }

  /** The deliveries of one incident event (one e-mail to every address, one message per chat), recorded as effects. */
  async function deliveries(
    dbx: Kysely<Database> | Transaction<Database>,
    incident: IncidentRow,
    event: 'opened' | 'closed',
    subjectLine: string,
    body: string,
    effectKey?: string,
    exclude?: AlertTarget,
    slackBody?: string,
    telegramBody?: string,
  ): Promise<string[]> {
    const t = targets(incident.job);
    const base = alertKeyPrefix(incident.id, event).slice(0, -1);
    const effect = (
      channel: string,
      target: string,
      request: EmailRequest | SlackRequest | TelegramRequest,
    ): NewEffect => ({
      key: `${base}:${channel}:${target}`,
      job: incident.job,
      windowKey: null,
      name: `alert-${event}`,
      channel,
      // An alert whose delivery is in doubt is sent again: a duplicate alert is better than a lost one.
      policy: 'resend',
      request,
      providerKey: `${base}:${channel}:${target}`,
    });
    const text = `${subjectLine}\n${body}`;
    // Slack reads <!channel> and <url|label> in a message as markup: the text (an error is a
    // provider's or a person's words) goes escaped, so it can neither ping nor dress a link; the
    // links the alert adds itself (runbook, page) are markup built from the configuration.
    const slackText = `${slackEscape(subjectLine)}\n${slackBody ?? slackEscape(body)}`;
    const all: NewEffect[] = [
      ...(t.email.length > 0
        ? [effect('email', t.email.join(','), { to: [...t.email], subject: subjectLine, text: body })]
        : []),
      ...t.slack.map((c) =>
        effect('slack', c, {
          channel: c,
          text: slackText,
          ...(effectKey ? { blocks: decisionBlocks(slackText, effectKey) } : {}),
        }),
      ),
      ...t.telegram.map((c) =>
        effect('telegram', c, {
          chatId: c,
          text: fitTelegram(telegramBody ? `${subjectLine}\n${telegramBody}` : text),
        }),
      ),
    ];
    // A channel reported down is not asked to carry its own report.
    const effects = exclude
      ? all.filter((e) => e.key !== `${base}:${exclude.channel}:${exclude.target}`)
      : all;
    if (effects.length === 0 && exclude) {
      logger.error(
        `ALERT job=${incident.job} incident=${incident.id} ${event}: no alert channel other than ${exclude.channel} ${exclude.target} to report through: ${subjectLine}`,
      );
    } else if (effects.length === 0) {
      // A failure nobody hears of is an error; a recovery notice with nowhere to go (an operator's
      // retry closed the incident, say) is only worth a warning.
      (event === 'opened' ? logger.error : logger.warn)(
        `ALERT job=${incident.job} incident=${incident.id} ${event}: no alert channels configured (set the job's alerts or TIDEMARK_ALERT_EMAIL / _SLACK / _TELEGRAM): ${subjectLine}`,
      );
    }
    await recordEffects(dbx, effects);
    return effects.map((e) => e.key);
  }

  const activities = {
    /** Opens (or counts again) the incident of a failure; alerts only when it opens. */
    async raiseIncident(input: RaiseInput): Promise<AlertDeliveries> {
      return await raise(db, input);
    },

    /** Closes the incident of a subject if one is open, with one recovery notice. */
    async resolveIncident(input: {
      job: string;
      subject: string;
      note: string;
    }): Promise<AlertDeliveries | null> {
      return await resolve(db, input);
    },
  };
  return { activities, raise, resolve };

  /**
   * Opens (or counts again) the incident of a failure, inside a window's transaction when given
   * one. It alerts when it opens; a repeat alerts only where the first alert never went out.
   */
  async function raise(
    dbx: Kysely<Database> | Transaction<Database>,
    input: RaiseInput,
    exclude?: AlertTarget,
  ): Promise<AlertDeliveries> {
    // The incident and its deliveries commit together: opened without them (the connection cut
    // between the two), every retry would find it open with nothing to deliver, and never alert.
    if (!dbx.isTransaction) return await dbx.transaction().execute((trx) => raise(trx, input, exclude));
    const error = redact(input.error);
    const attempts = input.attempts ?? (await windowAttempts(dbx, input));
    const link = runLink(input.workflowId, input.runId);
    const { id, opened } = await openIncident(dbx, {
      job: input.job,
      subject: input.subject,
      kind: input.kind,
      error,
      details: { attempts, workflowId: input.workflowId, runId: input.runId },
    });
    logger.error(
      `INCIDENT ${opened ? 'opened' : 'repeated'} id=${id} job=${input.job} subject=${input.subject} kind=${input.kind}: ${error}`,
    );
    if (!opened) {
      // The channel was down when it opened: the repeat delivers the alert that never went out.
      const unsent = await undeliveredAlerts(dbx, { job: input.job, prefix: alertKeyPrefix(id, 'opened') });
      return { incidentId: id, deliveries: unsent.map((a) => a.effect_key) };
    }
    const subjectLine = `[tidemark] ${input.job}: ${TITLES[input.kind]} (${input.subject})`;
    // The links come from the configuration: a password in TIDEMARK_WEB_URL is redacted like any.
    const page = pageLink(input.kind, input.job, input.subject, deps.pageUrl);
    const runbook = redact(runbookRef(input.kind, deps.pageUrl));
    const steps = nextSteps(input.kind, input.subject, input.job, input.lag);
    const lines = (errorText: string): AlertLine[] => [
      `job: ${input.job}`,
      `what: ${TITLES[input.kind]}`,
      `subject: ${input.subject}`,
      `error: ${errorText}`,
      ...(attempts !== null ? [`attempts: ${attempts}`] : []),
      ...(link ? [`run: ${link}`] : []),
      `incident: ${id}`,
      ...(input.notes ?? []).map(redact),
      deps.pageUrl ? { label: 'runbook: ', url: runbook } : `runbook: ${runbook}`,
      ...(page ? [{ label: 'page: ', url: redact(page) }] : []),
      'next steps:',
      ...steps.map((s) => `  ${s.command}    # ${s.why}`),
    ];
    const { plain: body, slack: slackBody } = render(lines(error));
    // Telegram's limit: the error gives way (the rest is in the incident), the links and steps stay.
    const over = subjectLine.length + 1 + body.length - MAX_TELEGRAM_TEXT;
    let telegramBody = body;
    if (over > 0) {
      const more = (n: number) => `… (${n} characters more: npx tidemark incidents --job ${input.job})`;
      const keep = Math.max(0, error.length - over - more(error.length).length);
      telegramBody = render(lines(`${error.slice(0, keep)}${more(error.length - keep)}`)).plain;
      const room = MAX_TELEGRAM_TEXT - subjectLine.length - 1;
      if (telegramBody.length > room) telegramBody = `${telegramBody.slice(0, room - 1)}…`;
    }
    const row = { id, job: input.job } as IncidentRow;
    return {
      incidentId: id,
      deliveries: await deliveries(
        dbx,
        row,
        'opened',
        subjectLine,
        body,
        input.kind === 'effect-unknown' ? input.subject : undefined,
        exclude,
        slackBody,
        telegramBody,
      ),
    };
  }

  /** Closes an open incident and records its recovery notices; inside a window's transaction when given one. */
  async function resolve(
    dbx: Kysely<Database> | Transaction<Database>,
    input: { job: string; subject: string; note: string },
  ): Promise<AlertDeliveries | null> {
    // Closed with its recovery notice or not at all (a retry finds nothing open to close).
    if (!dbx.isTransaction) return await dbx.transaction().execute((trx) => resolve(trx, input));
    const closed = await closeIncident(dbx, input.job, input.subject, deps.now());
    if (!closed) return null;
    logger.info(`INCIDENT closed id=${closed.id} job=${input.job} subject=${input.subject}: ${input.note}`);
    const subjectLine = `[tidemark] ${input.job}: recovered (${input.subject})`;
    const body = [
      `job: ${input.job}`,
      `subject: ${input.subject}`,
      `recovered: ${input.note}`,
      `failing since: ${closed.opened_at.toISOString()} (${closed.occurrences} failure${closed.occurrences === 1 ? '' : 's'})`,
      `last error: ${closed.last_error}`,
      `incident: ${closed.id}`,
    ].join('\n');
    return { incidentId: closed.id, deliveries: await deliveries(dbx, closed, 'closed', subjectLine, body) };
  }

  /**
   * Read on the raise's own transaction: a second connection taken while it holds one would
   * leave raises that hold every connection of the pool waiting on each other for ever.
   */
  async function windowAttempts(
    dbx: Kysely<Database> | Transaction<Database>,
    input: RaiseInput,
  ): Promise<number | null> {
    return await windowAttemptsOf(dbx, input.job, input.subject);
  }
}

export function alertActivities(deps: ActivityDeps) {
  return alerting(deps).activities;
}
