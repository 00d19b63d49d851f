// The tick workflow on the time-skipping server with stand-in activities: what a failed plan
// alerts. The windows a tick starts carry tidemark's search attributes, which the time-skipping
// server does not implement: ticks that start windows, and their Schedules, are the system tier's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE } from '../../contract/failures.js';
import type { TickResult } from '../../contract/workflows.js';
import { timeSkipping, withStandIns } from '../helpers/time-skipping.js';

const stack = timeSkipping();

const tick = (taskQueue: string, job: string) =>
  stack.env.client.workflow.execute('tick', {
    taskQueue,
    workflowId: `${job}/tick-2026-06-01T06:00:00Z`,
    args: [{ job, now: '2026-06-01T06:00:00Z' }],
  }) as Promise<TickResult>;

test('a tick whose plan fails opens a tick-failed incident, delivers its alert, and fails', async () => {
  const raised: { kind: string; subject: string; error: string }[] = [];
  const performed: string[] = [];
  const failure = await withStandIns(
    stack.env,
    {
      planTick: async () => {
        throw ApplicationFailure.nonRetryable('unknown job "gone"', FAILURE.unknownJob);
      },
      raiseIncident: async (r: { kind: string; subject: string; error: string }) => {
        raised.push({ kind: r.kind, subject: r.subject, error: r.error });
        return { incidentId: '7', deliveries: ['alert:7:opened:slack:ops'] };
      },
      performEffect: async ({ key }: { key: string }) => {
        performed.push(key);
        return { key, outcome: 'done', providerId: 'p', error: null };
      },
    },
    (taskQueue) =>
      tick(taskQueue, 'gone').then(
        () => assert.fail('the tick succeeded'),
        (err: Error) => err,
      ),
  );
  assert.match(
    String((failure as { cause?: { cause?: Error } }).cause?.cause?.message),
    /unknown job "gone"/,
  );
  assert.deepEqual(raised, [
    { kind: 'tick-failed', subject: 'tick', error: `unknown job "gone" (${FAILURE.unknownJob})` },
  ]);
  assert.deepEqual(performed, ['alert:7:opened:slack:ops']);
});
