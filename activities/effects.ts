// The effect guard: every external effect goes through begin -> effect -> done markers keyed
// by its effect key. A done effect is never repeated; a begin without a done is an unknown
// outcome, resolved by the provider's idempotency where it has one, else by the declared
// policy (`ask`: no automatic resend, an operator decides). Racing attempts are fenced.
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { claimEffect, getEffect, recordEffectAttempt, settleEffect, type EffectRow } from '../db/effects.js';
import type { ActivityDeps } from './deps.js';
import { EffectError, type Provider } from './notify/provider.js';

export interface EffectResult {
  readonly key: string;
  readonly outcome: 'done' | 'already-done' | 'unknown' | 'skipped';
  readonly providerId: string | null;
  readonly error: string | null;
}

export const EFFECT_FAILURE = Object.freeze({
  notSent: 'EffectNotSent',
  inProgress: 'EffectInProgress',
  rejected: 'EffectRejected',
  notConfigured: 'ChannelNotConfigured',
  unknownEffect: 'UnknownEffect',
} as const);

const DEFAULT_LEASE_MS = 60_000;

function leaseMs(): number {
  try {
    return Context.current().info.startToCloseTimeoutMs || DEFAULT_LEASE_MS;
  } catch {
    return DEFAULT_LEASE_MS;
  }
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
      status: 'done' | 'failed' | 'unknown' | 'skipped';
      providerId?: string | null;
      result?: unknown;
      error?: string | null;
    },
  ): Promise<boolean> {
    const at = deps.now();
    const kept = await settleEffect(db, row.effect_key, fence, { ...to, at });
    await recordEffectAttempt(db, {
      key: row.effect_key,
      fence,
      startedAt,
      finishedAt: at,
      outcome: kept ? to.status : `${to.status} (superseded)`,
      providerId: to.providerId ?? null,
      error: to.error ?? null,
    });
    return kept;
  }

  /** A begin marker with no done: the attempt that wrote it died or timed out mid-effect. */
  async function resolveOrphan(row: EffectRow, provider: Provider): Promise<EffectResult | 'act'> {
    const startedAt = deps.now();
    const seen = provider.check
      ? await provider.check(row.request as never, row.provider_key)
      : 'cannot-tell';
    if (seen === 'done') {
      await settle(row, row.fence, startedAt, { status: 'done', error: null });
      logger.info(`EFFECT done key=${row.effect_key}: the provider confirms the earlier attempt took effect`);
      return result(row, 'done');
    }
    if (seen === 'absent' || provider.idempotent || row.policy === 'resend') return 'act';
    const error = `begun at ${row.begun_at?.toISOString()} by attempt ${row.fence} and never marked done: outcome unknown`;
    if (row.policy === 'skip') {
      await settle(row, row.fence, startedAt, { status: 'skipped', error });
      logger.warn(`EFFECT skipped key=${row.effect_key}: ${error} (policy skip)`);
      return result(row, 'skipped', error);
    }
    await settle(row, row.fence, startedAt, { status: 'unknown', error });
    logger.warn(`EFFECT unknown key=${row.effect_key}: ${error}; not resent until an operator decides`);
    return result(row, 'unknown', error);
  }

  return {
    async performEffect(input: { key: string }): Promise<EffectResult> {
      const row = await getEffect(db, input.key);
      if (!row)
        throw ApplicationFailure.nonRetryable(
          `no effect "${input.key}" is recorded`,
          EFFECT_FAILURE.unknownEffect,
        );
      const provider = (deps.channels as Record<string, Provider | undefined> | undefined)?.[row.channel];
      const now = deps.now();

      switch (row.status) {
        case 'done':
          return result(row, 'already-done');
        case 'skipped':
          return result(row, 'skipped', row.last_error);
        case 'unknown':
          if (row.decision !== 'resend') return result(row, 'unknown', row.last_error);
          break;
        case 'begun':
          if (row.lease_until && row.lease_until > now) {
            const waitMs = row.lease_until.getTime() - now.getTime();
            throw ApplicationFailure.create({
              message: `effect ${row.effect_key} is being performed by attempt ${row.fence}; its lease ends in ${waitMs} ms`,
              type: EFFECT_FAILURE.inProgress,
              nextRetryDelay: waitMs,
            });
          }
          if (provider) {
            const resolved = await resolveOrphan(row, provider);
            if (resolved !== 'act') return resolved;
          }
          break;
        case 'pending':
        case 'failed':
          break;
      }
      if (!provider) {
        const error = `channel "${row.channel}" is not configured: set ${CHANNEL_ENV[row.channel] ?? 'its settings'}`;
        await settleEffect(db, row.effect_key, row.fence, { status: 'failed', error, at: now });
        logger.error(`EFFECT failed key=${row.effect_key}: ${error}`);
        throw ApplicationFailure.nonRetryable(error, EFFECT_FAILURE.notConfigured);
      }

      const fence = await claimEffect(db, row.effect_key, row.fence, leaseMs(), now);
      if (fence === undefined) {
        throw ApplicationFailure.create({
          message: `effect ${row.effect_key} was claimed by another attempt`,
          type: EFFECT_FAILURE.inProgress,
          nextRetryDelay: 1_000,
        });
      }
      const startedAt = deps.now();
      let sent: { providerId: string | null; result?: unknown };
      try {
        sent = await provider.perform(row.request as never, row.provider_key);
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
        if (provider.idempotent || row.policy === 'resend') {
          await settle(row, fence, startedAt, { status: 'failed', error });
          throw ApplicationFailure.create({ message: error, type: EFFECT_FAILURE.notSent });
        }
        const status = row.policy === 'skip' ? 'skipped' : 'unknown';
        await settle(row, fence, startedAt, { status, error });
        logger.warn(
          `EFFECT ${status} key=${row.effect_key}: ${error}${status === 'unknown' ? '; not resent until an operator decides' : ''}`,
        );
        return { key: row.effect_key, outcome: status, providerId: null, error };
      }
      await deps.hooks?.afterEffect?.(row.effect_key);
      const kept = await settle(row, fence, startedAt, {
        status: 'done',
        providerId: sent.providerId,
        result: sent.result,
        error: null,
      });
      if (!kept)
        logger.warn(
          `EFFECT done key=${row.effect_key} by attempt ${fence}, but a newer attempt had taken it over`,
        );
      logger.info(
        `EFFECT done key=${row.effect_key} channel=${row.channel} provider-id=${sent.providerId ?? '-'}`,
      );
      return { key: row.effect_key, outcome: 'done', providerId: sent.providerId, error: null };
    },
  };
}
