// An operator's decision on an effect whose outcome is unknown: resend it (performed at once,
// through the same guard) or skip it. Either closes the effect's incident with one notice.
// Used by the CLI now and by the Slack approval flow later.
import { ApplicationFailure } from '@temporalio/common';
import { closeIncident, decideEffect, getEffect, leaseLeftMs, settleEffect } from '../db/effects.js';
import type { ActivityDeps } from './deps.js';
import { deliverNow, raiseNow, resolveNow } from './direct-alerts.js';
import { EFFECT_FAILURE } from '../contract/failures.js';
import { effectActivities, type EffectResult } from './effects.js';

export class DecisionError extends Error {
  readonly code = 'DECISION';
}

export async function decideUnknownEffect(
  deps: ActivityDeps,
  key: string,
  decision: 'resend' | 'skip',
  by: string,
): Promise<EffectResult> {
  const row = await getEffect(deps.db, key);
  if (!row)
    throw new DecisionError(`no effect "${key}"; list them with: tidemark effects list --status unknown`);
  // A begin marker whose lease passed (its attempt died: a killed resend, a worker gone for good)
  // is unknown whoever finds it, the person deciding included; one whose lease runs is in progress.
  if (row.status === 'begun') {
    const now = deps.now();
    // Judged on the database's clock, not this process's, which may run ahead of the holder's.
    const left = await leaseLeftMs(deps.db, key, row.fence);
    if (left === undefined)
      throw new DecisionError(`effect "${key}" changed while it was read: decide it again`);
    if (left > 0)
      throw new DecisionError(
        `effect "${key}" is being performed by attempt ${row.fence} until ${row.lease_until?.toISOString()} (database clock): decide it after that if it is still unknown`,
      );
    await settleEffect(deps.db, key, row.fence, {
      status: 'unknown',
      error: `begun at ${row.begun_at?.toISOString()} by attempt ${row.fence} and never marked done: outcome unknown`,
      at: now,
    });
  }
  // A resend needs the channel here: recorded and then not performed, the decision would stay
  // on and a later re-drive of the window would resend behind a command that reported failure.
  if (decision === 'resend' && !(deps.channels as Record<string, unknown> | undefined)?.[row.channel])
    throw new DecisionError(
      `effect "${key}" goes through channel "${row.channel}", which is not configured here: decide it where that channel is configured; nothing was decided`,
    );
  if (!(await decideEffect(deps.db, key, decision, by, deps.now()))) {
    throw new DecisionError(`effect "${key}" is ${row.status}, not unknown: there is nothing to decide`);
  }
  deps.logger.info(`EFFECT decision key=${key} decision=${decision} by=${by}`);
  const result: EffectResult =
    decision === 'skip'
      ? { key, outcome: 'skipped', providerId: null, error: row.last_error }
      : await performByHand(deps, key);
  if (result.outcome === 'done' || result.outcome === 'already-done' || result.outcome === 'skipped') {
    await resolveNow(deps, {
      job: row.job,
      subject: key,
      note: `${decision === 'resend' ? 'resent' : 'skipped'} by ${by}`,
    });
  }
  // The one resend allowed was used and its outcome is in doubt again: a new question.
  if (result.outcome === 'unknown')
    await askAgain(deps, row.job, key, `resent by ${by}, and the outcome is unknown again`, result);
  return result;
}

/**
 * Performs an effect at a person's request. A lost reply that the provider could be asked about
 * is unknown here (no Temporal retry follows to ask; the next decision does).
 */
async function performByHand(deps: ActivityDeps, key: string): Promise<EffectResult> {
  const result: EffectResult = await effectActivities(deps)
    .performEffect({ key })
    .catch((err: unknown) => {
      if (err instanceof ApplicationFailure && err.type === EFFECT_FAILURE.inDoubt)
        return { key, outcome: 'unknown' as const, providerId: null, error: err.message };
      throw err;
    });
  // Found sent twice: the finding's alert goes out from here, as the window's would from its workflow.
  if (result.alerts) await deliverNow(deps, result.alerts);
  return result;
}

/** A new incident and a new alert: the open one already alerted, and a repeat would stay silent. */
async function askAgain(deps: ActivityDeps, job: string, key: string, what: string, result: EffectResult) {
  await closeIncident(deps.db, job, key, deps.now());
  await raiseNow(deps, {
    job,
    subject: key,
    kind: 'effect-unknown',
    error: `${what}: ${result.error ?? 'no answer'}; resend or skip it: tidemark effects decide ${key} --resend|--skip`,
  });
}

/** Tries an effect that stayed `failed` (not sent, or refused) once more, by an operator's hand. */
export async function retryFailedEffect(deps: ActivityDeps, key: string, by: string): Promise<EffectResult> {
  const row = await getEffect(deps.db, key);
  if (!row)
    throw new DecisionError(`no effect "${key}"; list them with: tidemark effects list --status failed`);
  if (row.status !== 'failed')
    throw new DecisionError(
      `effect "${key}" is ${row.status}, not failed: only a failed effect is retried (an unknown one is decided)`,
    );
  deps.logger.info(`EFFECT retry key=${key} by=${by}`);
  const result = await performByHand(deps, key);
  if (result.outcome === 'done' || result.outcome === 'already-done')
    await resolveNow(deps, { job: row.job, subject: key, note: `retried by ${by}` });
  if (result.outcome === 'unknown')
    await askAgain(deps, row.job, key, `retried by ${by}, and the outcome is unknown`, result);
  return result;
}
