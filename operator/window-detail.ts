// Everything tidemark knows about one window: its ledger record of every generation, every run
// record, each effect with its attempts and what the provider answered, incidents about it, its
// rerun requests with their decisions, records set aside, and where its runs are in the Temporal
// Web UI. Shared by the page and any other operator tool. Nothing here is a secret: effect
// requests are shown as a summary (a webhook's path or query may be its secret, an attachment is
// bulk), and errors were redacted when they were recorded.
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import type { Config } from '../config/env.js';
import { inSpan } from '../db/compaction.js';
import type { Database } from '../db/schema.js';
import { msUntilAllowed } from '../schedules/hours.js';
import type { Job } from '../schedules/job.js';
import { isAligned, isClosed, windowAt } from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import { windowLabels } from './window-labels.js';
import { compactedRow, firstWindowOf, type LedgerRow } from './window-ledger.js';
import { runningWindows, waitingForHours, windowState } from './window-state.js';
import { urlsAsOrigins, urlsAsOriginsIn } from './shown.js';

export class UnknownWindowError extends Error {
  readonly code = 'UNKNOWN_WINDOW';
}

/**
 * The window start a key names: `<job>/<start>`, or the start alone, either with a `#<generation>`
 * suffix or not. Undefined when it names no window of the job.
 */
export function windowStartOf(job: Job, key: string): Date | undefined {
  const bare = key.startsWith(`${job.name}/`) ? key.slice(job.name.length + 1) : key;
  const m = /^(\d{4}-\d{2}-\d{2}T[0-9:.]+Z)(?:#\d+)?$/.exec(bare);
  if (!m) return undefined;
  const start = new Date(m[1]!);
  if (Number.isNaN(start.getTime()) || !isAligned(job.grid, job.timezone, start)) return undefined;
  return start;
}

/** The Temporal Web UI page of a workflow. */
export const webUiLink = (
  config: Pick<Config, 'TIDEMARK_WEB_UI_URL' | 'TEMPORAL_NAMESPACE'>,
  workflowId: string,
) =>
  `${config.TIDEMARK_WEB_UI_URL}/namespaces/${encodeURIComponent(config.TEMPORAL_NAMESPACE)}/workflows/${encodeURIComponent(workflowId)}`;

/** What an effect asked for, without what may be secret or bulky. */
export function requestSummary(channel: string, request: unknown): Record<string, unknown> {
  const r = (request ?? {}) as Record<string, unknown>;
  const text = (v: unknown) =>
    typeof v === 'string' ? (v.length > 300 ? `${v.slice(0, 300)}…` : v) : undefined;
  switch (channel) {
    case 'email':
      return {
        to: r.to,
        subject: text(r.subject),
        attachments: Array.isArray(r.attachments)
          ? r.attachments.map((a: { filename?: unknown }) => a.filename)
          : [],
      };
    case 'slack':
      return { channel: r.channel, text: text(r.text), ...(r.ts ? { replaces: r.ts } : {}) };
    case 'telegram':
      return { chatId: r.chatId, text: text(r.text) };
    case 'http': {
      // The origin only: a webhook's path (Slack, Discord) or query is often its secret.
      let origin = '(not a URL)';
      try {
        origin = new URL(String(r.url)).origin;
      } catch {
        // kept as said
      }
      return { method: r.method, origin };
    }
    default:
      return {};
  }
}

/** A provider's reply is shown as it was recorded, cut to this many characters of JSON. */
const MAX_REPLY = 4_000;
const bounded = (v: unknown) => {
  if (v === null || v === undefined) return null;
  const json = JSON.stringify(v);
  return json.length <= MAX_REPLY ? v : { truncated: `${json.slice(0, MAX_REPLY)}…`, chars: json.length };
};
const iso = (t: Date | null) => (t ? isoUtc(t) : null);

export interface DetailOptions {
  db: Kysely<Database>;
  client: Client;
  config: Pick<Config, 'TIDEMARK_WEB_UI_URL' | 'TEMPORAL_NAMESPACE'>;
  job: Job;
  key: string;
  now: Date;
}

export async function windowDetail(o: DetailOptions) {
  const { db, job, now } = o;
  const start = windowStartOf(job, o.key);
  if (!start) {
    const near = (() => {
      const m = /(\d{4}-\d{2}-\d{2}T[0-9:.]+Z)/.exec(o.key);
      const t = m ? new Date(m[1]!) : undefined;
      return t && !Number.isNaN(t.getTime()) ? windowAt(job.grid, job.timezone, t) : undefined;
    })();
    throw new UnknownWindowError(
      `window ${JSON.stringify(o.key.slice(0, 120))} is not a window of ${job.name} (grid ${job.grid.label} in ${job.timezone})` +
        (near
          ? `; the instant lies in ${windowKey(job.name, near.start)}`
          : '; name it <job>/<start ISO UTC>'),
    );
  }
  const w = windowAt(job.grid, job.timezone, start);
  const key = windowKey(job.name, start);

  const ledger = await db
    .selectFrom('job_windows')
    .selectAll()
    .where('job', '=', job.name)
    .where('window_start', '=', start)
    .orderBy('generation')
    .execute();
  const maxGeneration = Math.max(0, ...ledger.map((r) => r.generation));
  const requests = await db
    .selectFrom('rerun_requests')
    .selectAll()
    .where('job', '=', job.name)
    .where('window_start', '=', start)
    .orderBy('requested_at')
    .execute();
  const generations = Math.max(maxGeneration, ...requests.map((r) => r.generation));
  const keys = Array.from({ length: generations + 1 }, (_, g) => windowKey(job.name, start, g));

  const [runs, effects, incidents, audit, quarantined, asked] = await Promise.all([
    db
      .selectFrom('job_runs')
      .selectAll()
      .where('job', '=', job.name)
      .where('window_start', '=', start)
      .where('kind', 'in', ['window', 'rerun', 'backfill'])
      .orderBy('started_at')
      .orderBy('id')
      .execute(),
    db
      .selectFrom('effects')
      .selectAll()
      .where('window_key', 'in', keys)
      .orderBy('created_at')
      .orderBy('effect_key')
      .execute(),
    db
      .selectFrom('incidents')
      .selectAll()
      .where('job', '=', job.name)
      // A range in the C collation (index incidents_subject_idx), then the prefix itself.
      .where(sql<boolean>`subject collate "C" >= ${key} and subject collate "C" < ${key} || chr(1114111)`)
      .where(sql<boolean>`starts_with(subject, ${key})`)
      .orderBy('opened_at')
      .execute(),
    requests.length === 0
      ? []
      : db
          .selectFrom('approval_audit')
          .selectAll()
          .where(
            'request',
            'in',
            requests.map((r) => r.workflow_id),
          )
          .orderBy('at')
          .orderBy('id')
          .execute(),
    db
      .selectFrom('quarantine')
      .select(['generation', sql<number>`count(*)::int`.as('n')])
      .where('job', '=', job.name)
      .where('window_start', '=', start)
      .groupBy('generation')
      .execute(),
    // Who asked for each rerun through the page (web_actions), as signed in.
    requests.length === 0
      ? []
      : db
          .selectFrom('web_actions')
          .selectAll()
          .where(
            'target',
            'in',
            requests.map((r) => r.workflow_id),
          )
          .where('action', '=', 'POST /api/jobs/:job/rerun')
          .execute(),
  ]);
  const askedThrough = (request: string) => {
    const a = asked.find((x) => x.target === request);
    return a
      ? {
          subject: a.verified ? a.subject : null,
          displayName: a.display_name,
          credential: a.credential,
          source: 'web',
        }
      : null;
  };
  const attempts =
    effects.length === 0
      ? []
      : await db
          .selectFrom('effect_attempts')
          .selectAll()
          .where(
            'effect_key',
            'in',
            effects.map((e) => e.effect_key),
          )
          .orderBy('id')
          .execute();

  const first = await firstWindowOf(db, job);
  let running: number | undefined;
  let waiting = false;
  const notes: string[] = [];
  try {
    running = (await runningWindows(o.client, job.name)).get(key);
    if (running !== undefined && job.allowedHours && msUntilAllowed(now, job.allowedHours, job.timezone) > 0)
      waiting = (
        await waitingForHours(o.client, job.name, new Map([[key, running]]), { from: w.start, to: w.end })
      ).has(key);
  } catch (err) {
    notes.push(`Temporal could not say whether this window runs now (${(err as Error).message})`);
  }
  // A window whose generation-0 marker was folded into a span (db/compaction.ts) is done at generation 0.
  const rows: LedgerRow[] =
    !ledger.some((r) => r.generation === 0) && (await inSpan(db, job.name, start))
      ? [compactedRow(start), ...(ledger as LedgerRow[])]
      : (ledger as LedgerRow[]);
  const { state, generation } = windowState({
    rows,
    running,
    closed: isClosed(w, now, job.latenessMs),
    beforeFirst: first === undefined || w.start < first,
    waitingForHours: waiting,
  });
  const last = rows.find((r) => r.generation === generation);

  return {
    job: job.name,
    timezone: job.timezone,
    key,
    ...windowLabels(w, job.timezone),
    state,
    generation,
    running: running !== undefined,
    // A rerun is asked for a done window; the page offers it when this is true.
    rerunnable:
      last?.status === 'done' && !requests.some((r) => r.status === 'pending' || r.status === 'approved'),
    ledger: ledger.map((r) => ({
      generation: r.generation,
      key: r.window_key,
      status: r.status,
      attempts: r.attempts,
      trigger: r.trigger,
      workflowId: r.workflow_id,
      startedAt: iso(r.started_at),
      finishedAt: iso(r.finished_at),
      durationMs: r.duration_ms,
      reason: r.reason,
      records: { in: r.records_in, applied: r.records_applied, quarantined: r.records_quarantined },
      temporal: r.workflow_id ? webUiLink(o.config, r.workflow_id) : null,
    })),
    runs: runs.map((r) => ({
      kind: r.kind,
      generation: r.generation,
      attempt: r.attempt,
      workflowId: r.workflow_id,
      startedAt: iso(r.started_at),
      finishedAt: iso(r.finished_at),
      durationMs: r.duration_ms,
      outcome: r.outcome,
      reason: r.reason,
      details: bounded(r.details),
    })),
    effects: effects.map((e) => ({
      key: e.effect_key,
      name: e.name,
      channel: e.channel,
      policy: e.policy,
      status: e.status,
      attempts: e.attempts,
      request: requestSummary(e.channel, e.request),
      providerId: e.provider_id,
      reply: bounded(urlsAsOriginsIn(e.result)),
      lastError: urlsAsOrigins(e.last_error),
      createdAt: iso(e.created_at),
      begunAt: iso(e.begun_at),
      doneAt: iso(e.done_at),
      decision: e.decision ? { decision: e.decision, by: e.decided_by, at: iso(e.decided_at) } : null,
      tries: attempts
        .filter((a) => a.effect_key === e.effect_key)
        .map((a) => ({
          fence: a.fence,
          startedAt: iso(a.started_at),
          finishedAt: iso(a.finished_at),
          durationMs: a.duration_ms,
          outcome: a.outcome,
          providerId: a.provider_id,
          error: urlsAsOrigins(a.error),
        })),
    })),
    incidents: incidents.map((i) => ({
      id: i.id,
      subject: i.subject,
      kind: i.kind,
      open: i.closed_at === null,
      openedAt: iso(i.opened_at),
      closedAt: iso(i.closed_at),
      occurrences: i.occurrences,
      lastError: urlsAsOrigins(i.last_error),
    })),
    reruns: requests.map((r) => ({
      request: r.workflow_id,
      generation: r.generation,
      status: r.status,
      reason: r.reason,
      requestedBy: r.requested_by,
      requestedAt: iso(r.requested_at),
      decidedBy: r.decided_by,
      decidedAt: iso(r.decided_at),
      note: r.note,
      temporal: webUiLink(o.config, r.workflow_id),
      decisions: audit
        .filter((a) => a.request === r.workflow_id)
        .map((a) => ({
          actor: a.actor,
          decision: a.decision,
          accepted: a.accepted,
          reason: a.reason,
          source: a.source,
          at: iso(a.at),
          // Verified: who the identity provider (or Slack) said they are, and through what.
          subject: a.subject ?? null,
          displayName: a.display_name ?? null,
          credential: a.credential ?? null,
        })),
      askedThrough: askedThrough(r.workflow_id),
    })),
    quarantined: Object.fromEntries(quarantined.map((q) => [q.generation, q.n])),
    temporal: webUiLink(o.config, windowKey(job.name, start, generation)),
    notes,
  };
}

export type WindowDetail = Awaited<ReturnType<typeof windowDetail>>;
