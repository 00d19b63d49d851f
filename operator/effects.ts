// Effects in doubt, for the page (and any interface that lists them): those whose outcome is
// unknown, those that failed, and those begun whose lease has passed (their attempt died; they are
// unknown whoever finds them, judged on the database's clock). An operator's decision on one goes
// through activities/decisions.ts, the code the CLI and Slack use, never a write of its own here.
import { sql, type Kysely } from 'kysely';
import { decideUnknownEffect, retryFailedEffect } from '../activities/decisions.js';
import type { ActivityDeps } from '../activities/deps.js';
import type { EffectResult } from '../activities/effects.js';
import type { Directory } from '../config/people.js';
import { requesterProblem } from '../config/people.js';
import { getEffect } from '../db/effects.js';
import { ledger } from '../db/ledger-schema.js';
import type { Database, EffectPolicy, EffectStatus } from '../db/schema.js';
import type { Catalog } from '../schedules/job.js';
import { windowAt } from '../schedules/windows.js';
import { isoUtc } from '../contract/window-key.js';
import { urlsAsOrigins, urlsAsOriginsIn } from './shown.js';

export interface EffectInDoubt {
  key: string;
  job: string;
  /**
   * The window's key, and its bounds and generation where the ledger has the window (its marker, or
   * a done span holding it: its end then from the catalog's grid).
   */
  window: string | null;
  windowStart: string | null;
  windowEnd: string | null;
  generation: number | null;
  name: string;
  channel: string;
  status: EffectStatus;
  /** A begun effect whose lease passed: its outcome is unknown, decided like one. */
  leasePassed: boolean;
  policy: EffectPolicy;
  attempts: number;
  lastError: string | null;
  /** What the provider said: its id for the message, and any fuller answer it gave. */
  providerId: string | null;
  providerReply: unknown;
  lastAttempt: { outcome: string; error: string | null; at: string } | null;
  /** What an operator can do: decide (resend or skip) an unknown one, retry a failed one. */
  actions: ('resend' | 'skip')[];
  decidedBy: string | null;
  updatedAt: string;
}

/**
 * The window start an effect's window key names (`<job>/<start ISO UTC>[#generation]`, as
 * windowKey makes it), null for any other key: the window is then found by its primary key, not
 * by its key, which has no index of its own (one would cost as much as the ledger's keys).
 */
const KEY_FORM = String.raw`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z(#\d+)?$`;
const KEY_START = sql`(case when substr(e.window_key, length(e.job) + 2) ~ ${KEY_FORM}
                            then split_part(substr(e.window_key, length(e.job) + 2), '#', 1)::timestamptz end)`;

/**
 * `catalog`: gives the bounds of a window whose marker was folded into a done span (the span holds
 * its start, from the key, and its generation, 0, but not its end); without it the end is null.
 */
/** A page asked for after an item that does not exist. */
export class PageCursorError extends Error {}

export async function effectsInDoubt(
  db: Kysely<Database>,
  filter: { job?: string; limit?: number; after?: string } = {},
  catalog?: Catalog,
): Promise<EffectInDoubt[]> {
  const t = ledger(db);
  // A page after a given effect: one that does not exist is bad input, not an empty page.
  if (filter.after !== undefined) {
    const known = await db
      .selectFrom('effects')
      .select('effect_key')
      .where('effect_key', '=', filter.after)
      .executeTakeFirst();
    if (!known) throw new PageCursorError(`after: no effect "${filter.after}"; start again without after`);
  }
  const rows = await sql<{
    effect_key: string;
    job: string;
    window_key: string | null;
    window_start: Date | null;
    window_end: Date | null;
    generation: number | null;
    name: string;
    channel: string;
    status: EffectStatus;
    lease_passed: boolean;
    policy: EffectPolicy;
    attempts: number;
    last_error: string | null;
    provider_id: string | null;
    result: unknown;
    attempt_outcome: string | null;
    attempt_error: string | null;
    attempt_at: Date | null;
    decided_by: string | null;
    updated_at: Date;
  }>`
    select e.effect_key, e.job, e.window_key,
           coalesce(w.window_start, case when sp.span_end is not null then ${KEY_START} end) as window_start,
           w.window_end, coalesce(w.generation, case when sp.span_end is not null then 0 end) as generation,
           e.name, e.channel,
           e.status, (e.status = 'begun' and e.lease_until <= now()) as lease_passed, e.policy, e.attempts,
           e.last_error, e.provider_id, e.result, a.outcome as attempt_outcome, a.error as attempt_error,
           a.finished_at as attempt_at, e.decided_by, e.updated_at
      from ${t.effects} e
      left join lateral (select window_start, window_end, generation from ${t.job_windows}
                          where job = e.job and window_start = ${KEY_START} and window_key = e.window_key
                          order by generation desc limit 1) w on true
      left join lateral (select s.span_end from ${t.job_done_spans} s
                          where w.window_start is null and strpos(e.window_key, '#') = 0
                            and s.job = e.job and s.span_start <= ${KEY_START}
                          order by s.span_start desc limit 1) sp on ${KEY_START} < sp.span_end
      left join lateral (select outcome, error, finished_at from ${t.effect_attempts}
                          where effect_key = e.effect_key order by id desc limit 1) a on true
     where (e.status in ('unknown', 'failed') or (e.status = 'begun' and e.lease_until <= now()))
       and (${filter.job ?? null}::text is null or e.job = ${filter.job ?? null})
       and (${filter.after ?? null}::text is null or (e.created_at, e.effect_key) >
            (select created_at, effect_key from ${t.effects} where effect_key = ${filter.after ?? null}))
     order by e.created_at, e.effect_key
     limit ${filter.limit ?? null}`.execute(db);
  // A window read from its span: its end from the job's grid, when the catalog has the job.
  const compactedEnd = (name: string, start: Date): string | null => {
    const job = catalog?.jobs.find((j) => j.name === name);
    return job ? isoUtc(windowAt(job.grid, job.timezone, start).end) : null;
  };
  return rows.rows.map((r) => ({
    key: r.effect_key,
    job: r.job,
    window: r.window_key,
    windowStart: r.window_start ? isoUtc(r.window_start) : null,
    windowEnd: r.window_end
      ? isoUtc(r.window_end)
      : r.window_start
        ? compactedEnd(r.job, r.window_start)
        : null,
    generation: r.generation,
    name: r.name,
    channel: r.channel,
    status: r.status,
    leasePassed: r.lease_passed === true,
    policy: r.policy,
    attempts: r.attempts,
    lastError: urlsAsOrigins(r.last_error),
    providerId: r.provider_id,
    providerReply: urlsAsOriginsIn(r.result),
    lastAttempt: r.attempt_at
      ? { outcome: r.attempt_outcome!, error: urlsAsOrigins(r.attempt_error), at: isoUtc(r.attempt_at) }
      : null,
    actions: r.status === 'failed' ? ['resend'] : ['resend', 'skip'],
    decidedBy: r.decided_by,
    updatedAt: isoUtc(r.updated_at),
  }));
}

/** A decision the interface refuses before anything is decided: `status` says how (400, 403, 404, 409). */
export class EffectDecisionRefused extends Error {
  readonly code = 'EFFECT_DECISION_REFUSED';
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Who may decide an effect, by their tidemark name: someone with a name who, when people are
 * configured, is one of them; and when approvers are configured, one of those (as in Slack).
 */
export function deciderProblem(
  directory: Directory,
  by: string,
  /** Signed in with the approver role (the page checked it): no name list to be on. */
  byRole = false,
): { status: number; message: string } | null {
  if (byRole) return null;
  const problem = requesterProblem(directory, by);
  if (problem) return { status: 400, message: `by: ${problem.replace('the requester', 'the decider')}` };
  if (directory.approvers.length > 0 && !directory.approvers.includes(by))
    return {
      status: 403,
      message: `by: ${by} may not decide effects (approvers: ${directory.approvers.join(', ')})`,
    };
  return null;
}

/**
 * An operator's Resend or Skip, as the CLI's `effects decide` (an unknown effect, or one begun
 * past its lease) or `effects retry` (a failed one, resent); audited like a decision in Slack.
 */
export async function decideEffectAs(
  deps: ActivityDeps,
  directory: Directory,
  d: {
    key: string;
    decision: 'resend' | 'skip';
    by: string;
    source: string;
    /** Who, verified by the page (signed in): audited, and an approver by role needs no listed name. */
    actor?: { subject: string; displayName: string; credential: string; approver: boolean };
  },
): Promise<EffectResult> {
  const audit = (accepted: boolean, reason: string | null) =>
    deps.db
      .insertInto('approval_audit')
      .values({
        request: d.key,
        actor: d.by,
        decision: d.decision,
        accepted,
        reason,
        source: d.source,
        ...(d.actor
          ? { subject: d.actor.subject, display_name: d.actor.displayName, credential: d.actor.credential }
          : {}),
      })
      .execute();
  const refuse = async (status: number, message: string): Promise<never> => {
    await audit(false, message);
    throw new EffectDecisionRefused(status, message);
  };
  const problem = deciderProblem(directory, d.by, d.actor?.approver ?? false);
  if (problem) return await refuse(problem.status, problem.message);
  const row = await getEffect(deps.db, d.key);
  if (!row) return await refuse(404, `effect: there is no effect "${d.key}"`);
  if (row.status === 'failed' && d.decision === 'skip')
    return await refuse(
      409,
      `effect "${d.key}" failed (it was not sent, or was refused): it can be resent; skip is for an effect whose outcome is unknown`,
    );
  try {
    const result =
      row.status === 'failed'
        ? await retryFailedEffect(deps, d.key, d.by)
        : await decideUnknownEffect(deps, d.key, d.decision, d.by);
    await audit(true, null).catch((err: Error) =>
      deps.logger.error(
        `EFFECT ${d.decision} of ${d.key} by ${d.by} applied but not audited: ${err.message}`,
      ),
    );
    return result;
  } catch (err) {
    if ((err as { code?: string }).code !== 'DECISION') throw err;
    return await refuse(409, (err as Error).message);
  }
}
