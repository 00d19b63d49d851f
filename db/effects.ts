// Effect markers and incidents: repository functions, each taking `db` or a transaction first.
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import { ledger } from './ledger-schema.js';
import type { RetryPolicyDto } from '../contract/workflows.js';
import type { Database, EffectPolicy, EffectStatus, EffectTable, IncidentTable } from './schema.js';

type Db = Kysely<Database> | Transaction<Database>;
export type EffectRow = Selectable<EffectTable>;
export type IncidentRow = Selectable<IncidentTable>;

export interface NewEffect {
  key: string;
  job: string;
  windowKey: string | null;
  name: string;
  channel: string;
  policy: EffectPolicy;
  request: unknown;
  providerKey: string;
  /** The effect's own retry policy; absent: the job's. */
  retry?: RetryPolicyDto | null;
}

/** Records effects to perform (the outbox); an effect already recorded is left as it is. */
export async function recordEffects(db: Db, effects: readonly NewEffect[]): Promise<void> {
  if (effects.length === 0) return;
  await db
    .insertInto('effects')
    .values(
      effects.map((e) => ({
        effect_key: e.key,
        job: e.job,
        window_key: e.windowKey,
        name: e.name,
        channel: e.channel,
        policy: e.policy,
        status: 'pending' as const,
        request: JSON.stringify(e.request),
        provider_key: e.providerKey,
        retry: e.retry ? JSON.stringify(e.retry) : null,
      })),
    )
    .onConflict((oc) => oc.column('effect_key').doNothing())
    .execute();
}

export async function getEffect(db: Db, key: string): Promise<EffectRow | undefined> {
  return await db.selectFrom('effects').selectAll().where('effect_key', '=', key).executeTakeFirst();
}

/**
 * Effects of a window that still need driving (not done, not skipped), oldest first, and the retry
 * policy of those that have one of their own.
 */
export async function openEffectsOfWindow(
  db: Db,
  windowKey: string,
): Promise<{ keys: string[]; retry: Record<string, RetryPolicyDto> }> {
  const rows = await db
    .selectFrom('effects')
    .select(['effect_key', 'retry'])
    .where('window_key', '=', windowKey)
    .where('status', 'in', ['pending', 'begun', 'failed', 'unknown'])
    .orderBy('created_at')
    .orderBy('effect_key')
    .execute();
  const retry: Record<string, RetryPolicyDto> = {};
  for (const r of rows) if (r.retry) retry[r.effect_key] = r.retry;
  return { keys: rows.map((r) => r.effect_key), retry };
}

export async function listEffects(
  db: Db,
  filter: { windowKey?: string; status?: EffectStatus[]; job?: string },
): Promise<EffectRow[]> {
  let q = db.selectFrom('effects').selectAll().orderBy('created_at').orderBy('effect_key');
  if (filter.windowKey) q = q.where('window_key', '=', filter.windowKey);
  if (filter.job) q = q.where('job', '=', filter.job);
  if (filter.status?.length) q = q.where('status', 'in', filter.status);
  return await q.execute();
}

/**
 * Claims the begin marker: one compare-and-set on the fencing number read before. Every change
 * of an effect's state raises the fence (a claim, a settle, a decision), so a claim made on a
 * state that has changed since it was read fails: two attempts that read the same row cannot
 * both win, nor can one that read "begun, lease passed" win after that attempt settled. The
 * claim uses up an operator's one-time resend decision.
 */
export async function claimEffect(
  db: Db,
  key: string,
  seenFence: number,
  leaseMs: number,
  at: Date,
): Promise<number | undefined> {
  const row = await db
    .updateTable('effects')
    .set({
      status: 'begun',
      fence: sql`fence + 1`,
      attempts: sql`attempts + 1`,
      begun_at: at,
      // The lease is set and judged on the database's clock, the one clock every worker shares:
      // a worker whose own clock runs ahead must not take a live lease for a passed one.
      lease_until: sql`now() + ${leaseMs}::float8 * interval '1 millisecond'`,
      decision: null,
      updated_at: at,
    })
    .where('effect_key', '=', key)
    .where('fence', '=', seenFence)
    .where((eb) =>
      eb.or([
        eb('status', '<>', 'begun'),
        eb('lease_until', 'is', null),
        eb('lease_until', '<=', sql<Date>`now()`),
      ]),
    )
    .returning('fence')
    .executeTakeFirst();
  return row?.fence;
}

/**
 * What is left of a begun effect's lease by the database's clock, in ms (0 when it has passed);
 * undefined when the effect moved on from `fence` since it was read.
 */
export async function leaseLeftMs(db: Db, key: string, fence: number): Promise<number | undefined> {
  const row = await db
    .selectFrom('effects')
    .select(
      sql<number>`greatest(0, ceil(extract(epoch from (coalesce(lease_until, now()) - now())) * 1000))::int`.as(
        'left_ms',
      ),
    )
    .where('effect_key', '=', key)
    .where('fence', '=', fence)
    .executeTakeFirst();
  return row?.left_ms;
}

/**
 * How a settle landed: `settled` while `fence` was still current; `late-answer` when a provider's
 * "done" arrived after someone else had moved the effect (set it unknown, failed or skipped, or
 * claimed it for a resend): the provider's answer is the truth and turns any of those into done,
 * so a resend whose own reply is lost cannot bury it; undefined when it was not kept.
 */
export type Settled = 'settled' | 'late-answer' | undefined;

/** Moves an effect to a new state while `fence` is current, raising the fence. */
export async function settleEffect(
  db: Db,
  key: string,
  fence: number,
  to: { status: EffectStatus; providerId?: string | null; result?: unknown; error?: string | null; at: Date },
): Promise<Settled> {
  const row = await db
    .updateTable('effects')
    .set({
      status: to.status,
      fence: sql`fence + 1`,
      updated_at: to.at,
      lease_until: null,
      ...(to.status === 'done' ? { done_at: to.at } : {}),
      ...(to.providerId !== undefined ? { provider_id: to.providerId } : {}),
      ...(to.result !== undefined ? { result: JSON.stringify(to.result) } : {}),
      ...(to.error !== undefined ? { last_error: to.error } : {}),
    })
    .where('effect_key', '=', key)
    // One statement, so no claim can slip between "not mine any more" and "but it was done".
    .where((eb) =>
      to.status === 'done'
        ? eb.or([eb('fence', '=', fence), eb('status', 'in', ['begun', 'unknown', 'failed', 'skipped'])])
        : eb('fence', '=', fence),
    )
    .returning('fence')
    .executeTakeFirst();
  if (!row) return undefined;
  return row.fence === fence + 1 ? 'settled' : 'late-answer';
}

export async function recordEffectAttempt(
  db: Db,
  a: {
    key: string;
    fence: number;
    startedAt: Date;
    finishedAt: Date;
    outcome: string;
    providerId?: string | null;
    error?: string | null;
  },
): Promise<void> {
  await db
    .insertInto('effect_attempts')
    .values({
      effect_key: a.key,
      fence: a.fence,
      started_at: a.startedAt,
      finished_at: a.finishedAt,
      duration_ms: a.finishedAt.getTime() - a.startedAt.getTime(),
      outcome: a.outcome,
      provider_id: a.providerId ?? null,
      error: a.error ?? null,
    })
    .execute();
}

/**
 * An operator's decision on an effect whose outcome is unknown; returns false if it is not
 * unknown. It raises the fence: a claim made on what was read before the decision fails.
 */
export async function decideEffect(
  db: Db,
  key: string,
  decision: 'resend' | 'skip',
  by: string,
  at: Date,
): Promise<boolean> {
  const row = await db
    .updateTable('effects')
    .set({
      decision,
      fence: sql`fence + 1`,
      decided_by: by,
      decided_at: at,
      updated_at: at,
      ...(decision === 'skip' ? { status: 'skipped' as const } : {}),
    })
    .where('effect_key', '=', key)
    .where('status', '=', 'unknown')
    .returning('effect_key')
    .executeTakeFirst();
  return row !== undefined;
}

/** Opens an incident, or counts one more occurrence of the open one. `opened` says which. */
export async function openIncident(
  db: Db,
  i: { job: string; subject: string; kind: string; error: string; details?: unknown },
): Promise<{ id: string; opened: boolean }> {
  const row = await sql<{ id: string; opened: boolean }>`
    insert into ${ledger(db).incidents} (job, subject, kind, last_error, details)
    values (${i.job}, ${i.subject}, ${i.kind}, ${i.error}, ${JSON.stringify(i.details ?? {})}::jsonb)
    on conflict (job, subject) where closed_at is null
    do update set occurrences = incidents.occurrences + 1, last_error = excluded.last_error, details = excluded.details
    returning id::text, (xmax = 0) as opened`.execute(db);
  return row.rows[0]!;
}

/** Closes the open incident of (job, subject), if there is one. */
export async function closeIncident(
  db: Db,
  job: string,
  subject: string,
  at: Date,
): Promise<IncidentRow | undefined> {
  return await db
    .updateTable('incidents')
    .set({ closed_at: at })
    .where('job', '=', job)
    .where('subject', '=', subject)
    .where('closed_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

export async function openIncidents(
  db: Db,
  job?: string,
  page: { limit?: number; after?: string } = {},
): Promise<IncidentRow[]> {
  let q = db
    .selectFrom('incidents')
    .selectAll()
    .where('closed_at', 'is', null)
    .orderBy('opened_at')
    .orderBy('id');
  if (job) q = q.where('job', '=', job);
  // After the incident `after` in this order (compared in the database: opened_at has microseconds).
  if (page.after)
    q = q.where(
      sql<boolean>`(opened_at, id) > (select i.opened_at, i.id from ${ledger(db).incidents} i where i.id = ${page.after})`,
    );
  if (page.limit !== undefined) q = q.limit(page.limit);
  return await q.execute();
}
