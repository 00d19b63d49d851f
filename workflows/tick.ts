// tick: fired by the job's Schedule. Starts one window child per closed window not yet done,
// oldest first, at most the job's catch-up cap; the rest wait for the next tick.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { workflowInfo } from '@temporalio/workflow';
import { deliver, describeFailure, raise } from './alerts.js';
import { startWindow } from './children.js';
import { bookkeeping } from './policy.js';
import type { TickInput, TickResult } from '../contract/workflows.js';

const SCHEDULED_START = defineSearchAttributeKey('TemporalScheduledStartTime', SearchAttributeType.DATETIME);

/** The tick's "now": the input's, else the schedule's nominal time, else when this run started. */
function tickNow(input: TickInput): string {
  if (input.now) return input.now;
  const nominal = workflowInfo().typedSearchAttributes.get(SCHEDULED_START);
  return (nominal ?? workflowInfo().startTime).toISOString();
}

export async function tick(input: TickInput): Promise<TickResult> {
  try {
    return await runTick(input);
  } catch (err) {
    const { workflowId, runId } = workflowInfo();
    await raise({
      job: input.job,
      subject: 'tick',
      kind: 'tick-failed',
      error: describeFailure(err),
      workflowId,
      runId,
    });
    throw err;
  }
}

async function runTick(input: TickInput): Promise<TickResult> {
  const startedAt = new Date().toISOString();
  const plan = await bookkeeping.planTick({ job: input.job, now: tickNow(input) });
  await deliver(plan.recovery);
  const starts = await Promise.all(plan.windows.map((w) => startWindow(w, 'schedule', plan.policy)));
  const result: TickResult = {
    job: plan.job,
    now: plan.now,
    watermark: plan.watermark,
    started: starts.filter((s) => s.handle).map((s) => s.key),
    running: starts.filter((s) => !s.handle).map((s) => s.key),
    alreadyDone: plan.alreadyDone,
  };
  await bookkeeping.recordTick({ result, startedAt, workflowId: workflowInfo().workflowId });
  return result;
}
