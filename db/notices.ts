// Alert deliveries that must reach a person: those recorded with a window's commit, and the
// ones not delivered yet (a channel down), which are driven again until they are.
import type { Kysely, Transaction } from 'kysely';
import type { Database, EffectStatus } from './schema.js';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * Statuses of an alert delivery that has not reached its channel and may still be sent. An alert
 * in doubt (`unknown`: a 5xx, a lost reply) is one of them: alerts are sent again when in doubt.
 */
export const UNDELIVERED: readonly EffectStatus[] = ['pending', 'failed', 'begun', 'unknown'];

export interface UndeliveredAlert {
  effect_key: string;
  job: string;
  channel: string;
  status: EffectStatus;
  attempts: number;
  created_at: Date;
  updated_at: Date;
  lease_until: Date | null;
  last_error: string | null;
}

/** Links alert deliveries to the window whose transaction recorded them. */
export async function recordWindowNotices(
  trx: Transaction<Database>,
  windowKey: string,
  effectKeys: readonly string[],
): Promise<void> {
  if (effectKeys.length === 0) return;
  await trx
    .insertInto('window_notices')
    .values(effectKeys.map((k) => ({ window_key: windowKey, effect_key: k })))
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/** The window's recorded notices that have not been delivered yet, oldest first. */
export async function undeliveredNoticesOfWindow(db: Db, windowKey: string): Promise<string[]> {
  const rows = await db
    .selectFrom('window_notices as n')
    .innerJoin('effects as e', 'e.effect_key', 'n.effect_key')
    .select('e.effect_key')
    .where('n.window_key', '=', windowKey)
    .where('e.status', 'in', UNDELIVERED)
    .orderBy('e.created_at')
    .orderBy('e.effect_key')
    .execute();
  return rows.map((r) => r.effect_key);
}

/**
 * Alert deliveries not delivered yet, oldest first: of one incident event when `prefix` is
 * given (`alert:<incident>:opened:`), else of every incident, at most `limit`.
 */
export async function undeliveredAlerts(
  db: Db,
  filter: { job?: string; prefix?: string; limit?: number } = {},
): Promise<UndeliveredAlert[]> {
  let q = db
    .selectFrom('effects')
    .select([
      'effect_key',
      'job',
      'channel',
      'status',
      'attempts',
      'created_at',
      'updated_at',
      'lease_until',
      'last_error',
    ])
    .where('status', 'in', UNDELIVERED)
    .where('name', 'in', ['alert-opened', 'alert-closed'])
    .orderBy('created_at')
    .orderBy('effect_key');
  if (filter.job) q = q.where('job', '=', filter.job);
  if (filter.prefix) q = q.where('effect_key', 'like', `${filter.prefix.replace(/[\\%_]/g, '\\$&')}%`);
  if (filter.limit) q = q.limit(filter.limit);
  return await q.execute();
}
