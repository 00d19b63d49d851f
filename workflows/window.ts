// window: one window of one job. Its workflow id is the window key, so the engine refuses a
// second copy while it runs; the ledger refuses one after it is done. After the commit it
// drives the window's external effects, and a failure of either alerts.
import { ApplicationFailure, patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deliver, describeFailure, raise } from './alerts.js';
import { waitingForClose } from './closing.js';
import { EFFECT_REFUSALS, FAILURE } from '../contract/failures.js';
import { bookkeeping, retryOf, runsLocally, windowActivity, windowLocalActivity } from './policy.js';
import {
  type ActivityPolicy,
  type EffectOutcomeDto,
  type WindowInput,
  type WindowResult,
  type WindowRunResult,
} from '../contract/workflows.js';

function effectActivity(policy: ActivityPolicy) {
  return proxyActivities<Activities>({
    startToCloseTimeout: policy.effectTimeoutMs ?? 60_000,
    retry: retryOf(policy, EFFECT_REFUSALS),
  });
}

/** The settle step retries as the job's window does, not for minutes as bookkeeping does. */
function settleActivity(policy: ActivityPolicy) {
  return proxyActivities<Activities>({
    startToCloseTimeout: policy.startToCloseTimeoutMs,
    retry: retryOf(policy),
  });
}

const LOCAL_PATCH = 'window-local-activity';
const ALERTS_PATCH = 'window-alerts-in-commit';

/**
 * True, for a run started with a revision. A worker on code before revisions may have run it and
 * recorded the marker anyway: on replay the marker is matched (a marker no call matches fails the
 * task). Only on replay: there `patched` records nothing, and finds the marker or not; a live call
 * would record one.
 */
function replayMarker(patchId: string): true {
  if (workflowInfo().unsafe.isReplaying) patched(patchId);
  return true;
}

export async function window(input: WindowInput): Promise<WindowRunResult> {
  // A run started with a revision takes today's shape and records no patch marker. One without
  // decides by its markers (runs started before them have none and replay the old way).
  const current = (input.revision ?? 0) >= 1;
  const local =
    runsLocally(input.policy, input.revision ?? 0) &&
    (current ? replayMarker(LOCAL_PATCH) : patched(LOCAL_PATCH));
  const { processWindow } = local ? windowLocalActivity(input.policy) : windowActivity(input.policy);
  const { workflowId, runId } = workflowInfo();
  const key = input.key || workflowId;
  // Heavy jobs run only in their allowed hours: the run waits for them, durably.
  if (input.policy.allowedHours) {
    for (
      let wait = await bookkeeping.msUntilAllowed({
        now: new Date().toISOString(),
        hours: input.policy.allowedHours,
      });
      wait > 0;
      wait = await bookkeeping.msUntilAllowed({
        now: new Date().toISOString(),
        hours: input.policy.allowedHours,
      })
    ) {
      await sleep(wait);
    }
  }
  let result: WindowResult;
  try {
    result = await waitingForClose(() => processWindow({ ...input, key, asOf: new Date().toISOString() }));
  } catch (err) {
    await raise({
      job: input.job,
      subject: key,
      kind: 'window-failed',
      error: describeFailure(err),
      workflowId,
      runId,
    });
    throw err;
  }
  if (result.recovery?.length) await deliver(result.recovery);
  // The window's alerts are recorded with its commit; runs started before that replay the old way.
  if (current ? replayMarker(ALERTS_PATCH) : patched(ALERTS_PATCH)) {
    if (result.alerts?.length) await deliver(result.alerts);
  } else {
    for (const f of result.findings ?? []) {
      await raise({
        job: input.job,
        subject: f.subject,
        kind: 'finding',
        error: f.message,
        workflowId,
        runId,
      });
    }
  }

  // Effects in the order the handler declared them; one that fails or whose outcome is
  // unknown alerts, and the run ends failed so that it shows in the Web UI.
  const effectOutcomes: EffectOutcomeDto[] = [];
  for (const effectKey of result.effects ?? []) {
    // An effect with a retry policy of its own retries by it; the others by the job's.
    const own = result.effectRetry?.[effectKey];
    const { performEffect } = effectActivity(own ? { ...input.policy, retry: own } : input.policy);
    try {
      const r = await performEffect({ key: effectKey });
      effectOutcomes.push({ key: effectKey, outcome: r.outcome, error: r.error });
      await deliver(r.alerts);
      if (r.outcome === 'unknown') {
        await raise({
          job: input.job,
          subject: effectKey,
          kind: 'effect-unknown',
          error: `${r.error ?? 'outcome unknown'}; resend or skip it: tidemark effects decide ${effectKey} --resend|--skip`,
          workflowId,
          runId,
        });
      }
    } catch (err) {
      const error = describeFailure(err);
      effectOutcomes.push({ key: effectKey, outcome: 'failed', error });
      await raise({ job: input.job, subject: effectKey, kind: 'effect-failed', error, workflowId, runId });
    }
  }
  if (input.policy.settles) {
    // The settle step fails like any step: an incident of its own, alerted, and the run fails.
    try {
      const settled = await settleActivity(input.policy).settleWindow({ ...input, key });
      await deliver(settled?.deliveries);
    } catch (err) {
      await raise({
        job: input.job,
        subject: `${key}:settle`,
        kind: 'settle-failed',
        error: describeFailure(err),
        workflowId,
        runId,
      });
      throw err;
    }
  }
  const open = effectOutcomes.filter((o) => o.outcome === 'unknown' || o.outcome === 'failed');
  if (open.length > 0) {
    throw ApplicationFailure.nonRetryable(
      `window ${key} committed, but ${open.length} effect(s) are not done: ${open.map((o) => `${o.key} ${o.outcome}`).join(', ')}`,
      FAILURE.effectsIncomplete,
    );
  }
  return { ...result, effectOutcomes };
}
