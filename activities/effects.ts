// The effect guard: every external effect goes through begin -> effect -> done markers keyed
// by its effect key. A done effect is never repeated; a begin without a done is an unknown
// outcome, resolved by the provider's idempotency where it has one, else by the declared
// policy (`ask`: no automatic resend, an operator decides). Racing attempts are fenced: every
// change of state raises the fence, and acting needs a claim on the fence that was read.
import { ApplicationFailure } from '@temporalio/common';
import { EFFECT_FAILURE } from '../contract/failures.js';
import {
  claimEffect,
  getEffect,
  leaseLeftMs,
  recordEffectAttempt,
  settleEffect,
  type EffectRow,
} from '../db/effects.js';
import { alerting } from './alerts.js';
import { beginPointOf, CRASH_POINT, reached } from './crash-points.js';
import type { ActivityDeps } from './deps.js';
import { EffectError, type CallOptions, type Provider } from './notify/provider.js';
import { effectSpan, labelEffect } from './tracing.js';
import { activityContext } from './context.js';

export interface EffectResult {
  readonly key: string;
  readonly outcome: 'done' | 'already-done' | 'unknown' | 'skipped';
  readonly providerId: string | null;
  readonly error: string | null;
  /**
   * Effect keys of alert deliveries for a finding this attempt recorded (the effect was performed
   * twice). The caller delivers them like every other alert: a workflow through its activities,
   * a process such as the CLI with deliverNow.
   */
  readonly alerts?: readonly string[];
}

/** The label of an attempt that only asked the provider, which confirmed an earlier send. */
const CONFIRMED = 'done (confirmed by the provider)';

/** The effect moved to another state between this attempt's read and its write: read it again. */
const CHANGED = Symbol('changed');

const DEFAULT_LEASE_MS = 60_000;

function leaseMs(): number {
  return activityContext()?.info.startToCloseTimeoutMs || DEFAULT_LEASE_MS;
}

/**
 * The deadline of a call made under a lease just claimed: the lease less a margin (for the
 * claim's round trip and the settle after it), so the call ends before another attempt may act.
 */
function withinLease(leaseMs: number): CallOptions {
  const budgetMs = Math.max(1, leaseMs - Math.min(5_000, leaseMs / 5));
  const endsAt = performance.now() + budgetMs;
  return {
    signal: AbortSignal.timeout(budgetMs),
    timeLeftMs: () => Math.max(1, endsAt - performance.now()),
  };
}

const CHANNEL_ENV: Record<string, string> = {
  email: 'SMTP_HOST',
  slack: 'SLACK_BOT_TOKEN',
  telegram: 'TELEGRAM_BOT_TOKEN',
};

export function effectActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  const redact = deps.redact ?? ((s: string) => s);

  const result = (
    row: EffectRow,
    outcome: EffectResult['outcome'],
    error: string | null = null,
  ): EffectResult => ({ key: row.effect_key, outcome, providerId: row.provider_id, error });

  /** Settles an attempt's marker and keeps the attempt's record; false if a newer attempt took over. */
  async function settle(
    row: EffectRow,
    fence: number,
    startedAt: Date,
    to: {
      status: 'done' | 'failed' | 'unknown' | 'skipped' | 'begun';
      providerId?: string | null;
      result?: unknown;
      error?: string | null;
    },
    outcome: string = to.status,
  ): Promise<boolean> {
    const at = deps.now();
    const how = await settleEffect(db, row.effect_key, fence, { ...to, at });
    await recordEffectAttempt(db, {
      key: row.effect_key,
      fence,
      startedAt,
      finishedAt: at,
      outcome:
        how === 'settled'
          ? outcome
          : how === 'late-answer'
            ? `${outcome} (late answer)`
            : `${outcome} (superseded)`,
      providerId: to.providerId ?? null,
      error: to.error ?? null,
    });
    if (how === 'late-answer')
      logger.warn(
        `EFFECT done key=${row.effect_key}: attempt ${fence}'s answer came after another attempt had moved the effect on (its lease had passed); the effect is done`,
      );
    return how !== undefined;
  }

  /**
   * Marks an effect the provider took as done. This attempt alone knows it happened: if the
   * marker were lost to a database outage (a restart, a failover, a dropped connection), the
   * next attempt would find a begin marker without a done and ask an operator about a message
   * that went out, or send it again (policy resend, every alert). So the write is tried again,
   * with a growing pause, for up to one lease; a done arriving after another attempt moved the
   * effect on is still kept (a late answer).
   */
  async function settleDone(
    row: EffectRow,
    fence: number,
    startedAt: Date,
    sent: { providerId: string | null; result?: unknown },
    leaseMs: number,
  ): Promise<boolean> {
    const giveUpAt = performance.now() + leaseMs;
    for (let pauseMs = 200; ; pauseMs = Math.min(2_000, pauseMs * 2)) {
      try {
        return await settle(row, fence, startedAt, {
          status: 'done',
          providerId: sent.providerId,
          result: sent.result,
          error: null,
        });
      } catch (err) {
        if (performance.now() + pauseMs > giveUpAt) throw err;
        logger.warn(
          `EFFECT done key=${row.effect_key}: the provider took it but its done marker could not be written (${(err as Error).message}); trying again in ${pauseMs} ms`,
        );
        await new Promise((r) => setTimeout(r, pauseMs));
      }
    }
  }

  /**
   * This attempt's send succeeded, and the effect was done already. If another attempt's own send
   * did it (not a status check confirming this one), it was performed twice: the finding is
   * recorded, and the deliveries of its alert are returned for the caller to perform.
   */
  async function doneAlready(row: EffectRow, fence: number): Promise<readonly string[]> {
    const others = await db
      .selectFrom('effect_attempts')
      .select('fence')
      .where('effect_key', '=', row.effect_key)
      .where('fence', '<>', fence)
      .where('outcome', 'in', ['done', 'done (late answer)'])
      .execute();
    if (others.length === 0) {
      logger.warn(`EFFECT done key=${row.effect_key} by attempt ${fence}, confirmed already by the provider`);
      return [];
    }
    const error = `effect ${row.effect_key} was performed twice: by attempt ${fence} and by attempt ${others.map((o) => o.fence).join(', ')} (a lease that passed while an attempt was still sending, a resend, or a status URL that lagged)`;
    logger.error(`EFFECT sent twice key=${row.effect_key}: ${error}`);
    try {
      const { deliveries } = await alerting(deps).activities.raiseIncident({
        job: row.job,
        subject: `${row.effect_key}:sent-twice`,
        kind: 'finding',
        error,
      });
      return deliveries;
    } catch (err) {
      logger.error(`EFFECT sent twice key=${row.effect_key}: alert failed: ${(err as Error).message}`);
      return [];
    }
  }

  /**
   * A begin marker with no done: the attempt that wrote it died or timed out mid-effect, so the
   * effect may have happened. Only the provider's answer (or a person) says otherwise; a process
   * without the channel's provider cannot ask, and leaves it unknown. CHANGED: someone else
   * moved the effect meanwhile, read it again.
   */
  async function resolveOrphan(
    row: EffectRow,
    provider: Provider | undefined,
  ): Promise<EffectResult | 'act' | typeof CHANGED> {
    const startedAt = deps.now();
    const seen = provider?.check
      ? await provider.check(row.request as never, row.provider_key)
      : 'cannot-tell';
    if (seen === 'done') {
      if (!(await settle(row, row.fence, startedAt, { status: 'done', error: null }, CONFIRMED)))
        return CHANGED;
      logger.info(`EFFECT done key=${row.effect_key}: the provider confirms the earlier attempt took effect`);
      return result(row, 'done');
    }
    if (
      provider &&
      (seen === 'absent' || provider.idempotent(row.request as never) || row.policy === 'resend')
    )
      return 'act';
    const error =
      `begun at ${row.begun_at?.toISOString()} by attempt ${row.fence} and never marked done: outcome unknown` +
      (provider
        ? ''
        : ` (channel "${row.channel}" is not configured here, so its provider could not be asked)`);
    if (row.policy === 'skip') {
      if (!(await settle(row, row.fence, startedAt, { status: 'skipped', error }))) return CHANGED;
      logger.warn(`EFFECT skipped key=${row.effect_key}: ${error} (policy skip)`);
      return result(row, 'skipped', error);
    }
    if (!(await settle(row, row.fence, startedAt, { status: 'unknown', error }))) return CHANGED;
    logger.warn(
      `EFFECT unknown key=${row.effect_key}: ${error}; ${row.policy === 'resend' ? 'resent where its channel is configured' : 'not resent until an operator decides'}`,
    );
    return result(row, 'unknown', error);
  }

  /** One read of the effect and what follows from it; CHANGED when the state moved under it. */
  async function once(key: string): Promise<EffectResult | typeof CHANGED> {
    const row = await getEffect(db, key);
    if (!row)
      throw ApplicationFailure.nonRetryable(`no effect "${key}" is recorded`, EFFECT_FAILURE.unknownEffect);
    labelEffect(row);
    const provider = (deps.channels as Record<string, Provider | undefined> | undefined)?.[row.channel];
    const now = deps.now();

    switch (row.status) {
      case 'done':
        return result(row, 'already-done');
      case 'skipped':
        return result(row, 'skipped', row.last_error);
      case 'unknown': {
        // Where the provider can say what happened, its answer comes before any resend or question.
        if (provider?.check && provider.canCheck?.(row.request as never)) {
          const startedAt = deps.now();
          const seen = await provider.check(row.request as never, row.provider_key);
          if (seen === 'done') {
            if (!(await settle(row, row.fence, startedAt, { status: 'done', error: null }, CONFIRMED)))
              return CHANGED;
            logger.info(
              `EFFECT done key=${row.effect_key}: the provider confirms an earlier attempt took effect`,
            );
            return result(row, 'done');
          }
          if (seen === 'absent') break;
        }
        // An operator's one-time resend (the claim uses it up), or a resend the policy allows.
        if (row.decision === 'resend') break;
        if (provider && (provider.idempotent(row.request as never) || row.policy === 'resend')) break;
        return result(row, 'unknown', row.last_error);
      }
      case 'begun': {
        // Judged on the database's clock: this worker's own clock may run ahead of the holder's.
        const waitMs = await leaseLeftMs(db, row.effect_key, row.fence);
        if (waitMs === undefined) return CHANGED;
        if (waitMs > 0) {
          throw ApplicationFailure.create({
            message: `effect ${row.effect_key} is being performed by attempt ${row.fence}; its lease ends in ${waitMs} ms`,
            type: EFFECT_FAILURE.inProgress,
            nextRetryDelay: waitMs,
          });
        }
        const resolved = await resolveOrphan(row, provider);
        if (resolved !== 'act') return resolved;
        break;
      }
      case 'pending':
      case 'failed':
        break;
    }
    if (!provider) {
      const error = `channel "${row.channel}" is not configured: set ${CHANNEL_ENV[row.channel] ?? 'its settings'}`;
      // Only an effect certainly not sent becomes failed; an unknown one keeps its state (and decision).
      if (row.status !== 'unknown') {
        if (!(await settleEffect(db, row.effect_key, row.fence, { status: 'failed', error, at: now })))
          return CHANGED;
      }
      logger.error(
        `EFFECT ${row.status === 'unknown' ? 'not resent' : 'failed'} key=${row.effect_key}: ${error}`,
      );
      throw ApplicationFailure.nonRetryable(error, EFFECT_FAILURE.notConfigured);
    }

    const lease = leaseMs();
    const fence = await claimEffect(db, row.effect_key, row.fence, lease, now);
    // Claimed or settled by another attempt since it was read: read it again (done, or in progress).
    if (fence === undefined) return CHANGED;
    await reached(deps, beginPointOf(row.effect_key), row.effect_key);
    const startedAt = deps.now();
    let sent: { providerId: string | null; result?: unknown };
    try {
      sent = await provider.perform(row.request as never, row.provider_key, withinLease(lease));
    } catch (err) {
      const e =
        err instanceof EffectError
          ? err
          : new EffectError('unknown', `unexpected failure: ${(err as Error)?.message ?? String(err)}`);
      const error = redact(e.message);
      if (e.kind === 'not-sent') {
        await settle(row, fence, startedAt, { status: 'failed', error });
        logger.warn(`EFFECT not sent key=${row.effect_key}: ${error}; will retry`);
        throw ApplicationFailure.create({
          message: error,
          type: EFFECT_FAILURE.notSent,
          ...(e.retryAfterMs !== undefined ? { nextRetryDelay: e.retryAfterMs } : {}),
        });
      }
      if (e.kind === 'rejected') {
        await settle(row, fence, startedAt, { status: 'failed', error });
        logger.error(`EFFECT rejected key=${row.effect_key}: ${error}`);
        throw ApplicationFailure.nonRetryable(error, EFFECT_FAILURE.rejected);
      }
      if (provider.idempotent(row.request as never) || row.policy === 'resend') {
        // Maybe sent: unknown, never "failed" (certainly not sent, which `effects retry` trusts).
        // The next attempt resends it, as the target's idempotency or the policy allows.
        await settle(row, fence, startedAt, { status: 'unknown', error }, 'unknown (to be resent)');
        logger.warn(`EFFECT unknown key=${row.effect_key}: ${error}; the next attempt resends it`);
        throw ApplicationFailure.create({ message: error, type: EFFECT_FAILURE.inDoubt });
      }
      if (provider.canCheck?.(row.request as never)) {
        // Unknown, and the next attempt asks the provider before acting again. Unknown, not a
        // begun marker: when no attempt follows (the retries are used up, an operator's resend),
        // it is still listed as unknown and a person can decide it.
        await settle(row, fence, startedAt, { status: 'unknown', error }, 'unknown (to be checked)');
        logger.warn(`EFFECT unknown key=${row.effect_key}: ${error}; the next attempt asks the provider`);
        throw ApplicationFailure.create({
          message: `${error}; the next attempt asks the provider whether it took effect`,
          type: EFFECT_FAILURE.inDoubt,
        });
      }
      const status = row.policy === 'skip' ? 'skipped' : 'unknown';
      if (!(await settle(row, fence, startedAt, { status, error }))) {
        // Moved meanwhile: an earlier attempt's late "done" is the answer, not this lost reply.
        const now = await getEffect(db, row.effect_key);
        if (now?.status === 'done') return result(now, 'already-done');
      }
      logger.warn(
        `EFFECT ${status} key=${row.effect_key}: ${error}${status === 'unknown' ? '; not resent until an operator decides' : ''}`,
      );
      return { key: row.effect_key, outcome: status, providerId: null, error };
    }
    await deps.hooks?.afterEffect?.(row.effect_key);
    await reached(deps, CRASH_POINT.afterProvider, row.effect_key);
    const kept = await settleDone(row, fence, startedAt, sent, lease);
    const alerts = kept ? [] : await doneAlready(row, fence);
    logger.info(
      `EFFECT done key=${row.effect_key} channel=${row.channel} provider-id=${sent.providerId ?? '-'}`,
    );
    return {
      key: row.effect_key,
      outcome: 'done',
      providerId: sent.providerId,
      error: null,
      ...(alerts.length > 0 ? { alerts } : {}),
    };
  }

  return {
    async performEffect(input: { key: string }): Promise<EffectResult> {
      return await effectSpan(input.key, async () => {
        for (let round = 0; round < 3; round++) {
          const r = await once(input.key);
          if (r !== CHANGED) return r;
        }
        throw ApplicationFailure.create({
          message: `effect ${input.key} kept changing state under this attempt; trying again`,
          type: EFFECT_FAILURE.inProgress,
          nextRetryDelay: 1_000,
        });
      });
    },
  };
}
