// The window workflow on the time-skipping server with stand-in activities: what it does with what
// its activities answer, hours of waiting included, in seconds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { EffectResult } from '../../activities/effects.js';
import { FAILURE } from '../../contract/failures.js';
import type { WindowInput, WindowResult, WindowRunResult } from '../../contract/workflows.js';
import { timeSkipping, withStandIns } from '../helpers/time-skipping.js';
import { windowPolicy } from '../helpers/windows.js';

const stack = timeSkipping();

const input = (job: string, extra: Partial<WindowInput> = {}): WindowInput => ({
  job,
  start: '2026-06-01T00:00:00Z',
  end: '2026-06-01T01:00:00Z',
  generation: 0,
  key: `${job}/2026-06-01T00:00:00Z`,
  trigger: 'manual',
  policy: windowPolicy(1, 30_000),
  revision: 2,
  ...extra,
});

const processed = (key: string, extra: Partial<WindowResult> = {}): WindowResult => ({
  key,
  outcome: 'processed',
  counts: { input: 1, applied: 1, quarantined: 0 },
  watermark: '2026-06-01T01:00:00Z',
  ...extra,
});

const run = (taskQueue: string, w: WindowInput) =>
  stack.env.client.workflow.execute('window', {
    taskQueue,
    workflowId: w.key,
    args: [w],
  }) as Promise<WindowRunResult>;

test('a window outside its allowed hours waits for them durably, then runs once', async () => {
  const w = input('night', {
    policy: { ...windowPolicy(1, 30_000), allowedHours: { from: '01:00', to: '05:00', timezone: 'UTC' } },
  });
  const asked: number[] = [];
  let processedAt: number | undefined;
  const startedAt = await stack.env.currentTimeMs();
  const result = await withStandIns(
    stack.env,
    {
      // Six hours to go at first; once the workflow has slept them, none.
      msUntilAllowed: async () => {
        asked.push(await stack.env.currentTimeMs());
        return asked.length === 1 ? 6 * 3_600_000 : 0;
      },
      processWindow: async (i: WindowInput) => {
        processedAt = await stack.env.currentTimeMs();
        return processed(i.key);
      },
    },
    (taskQueue) => run(taskQueue, w),
  );
  assert.equal(result.outcome, 'processed');
  assert.equal(asked.length, 2, 'asked again after the wait');
  assert.ok(processedAt! - startedAt >= 6 * 3_600_000, `ran ${processedAt! - startedAt} ms after the start`);
});

test("an effect found performed twice: the workflow delivers its finding's alert", async () => {
  const w = input('twice');
  const performed: string[] = [];
  const result = await withStandIns(
    stack.env,
    {
      processWindow: async (i: WindowInput) => processed(i.key, { effects: [`${i.key}:mail`] }),
      performEffect: async ({ key }: { key: string }): Promise<EffectResult> => {
        performed.push(key);
        return key.endsWith(':mail')
          ? { key, outcome: 'done', providerId: 'p1', error: null, alerts: ['alert:9:opened:telegram:ops'] }
          : { key, outcome: 'done', providerId: 'p2', error: null };
      },
    },
    (taskQueue) => run(taskQueue, w),
  );
  assert.deepEqual(performed, [`${w.key}:mail`, 'alert:9:opened:telegram:ops']);
  assert.deepEqual(result.effectOutcomes, [{ key: `${w.key}:mail`, outcome: 'done', error: null }]);
});

test('an effect whose outcome is unknown opens an incident, delivers its alert, and fails the run', async () => {
  const w = input('unknown');
  const raised: { kind: string; subject: string }[] = [];
  const performed: string[] = [];
  const failure = await withStandIns(
    stack.env,
    {
      processWindow: async (i: WindowInput) => processed(i.key, { effects: [`${i.key}:push`] }),
      performEffect: async ({ key }: { key: string }): Promise<EffectResult> => {
        performed.push(key);
        return key.endsWith(':push')
          ? { key, outcome: 'unknown', providerId: null, error: 'reply lost' }
          : { key, outcome: 'done', providerId: 'p', error: null };
      },
      raiseIncident: async (r: { kind: string; subject: string }) => {
        raised.push({ kind: r.kind, subject: r.subject });
        return { incidentId: '1', deliveries: ['alert:1:opened:email:ops'] };
      },
    },
    (taskQueue) =>
      run(taskQueue, w).then(
        () => assert.fail('the run succeeded'),
        (err: Error) => err,
      ),
  );
  assert.match(String((failure as { cause?: Error }).cause?.message), /1 effect\(s\) are not done/);
  assert.deepEqual(raised, [{ kind: 'effect-unknown', subject: `${w.key}:push` }]);
  assert.deepEqual(performed, [`${w.key}:push`, 'alert:1:opened:email:ops']);
});

test('a window not closed yet by the worker clock is called again after the delay the activity asked for', async () => {
  const w = input('skewed');
  const calls: number[] = [];
  const result = await withStandIns(
    stack.env,
    {
      processWindow: async (i: WindowInput) => {
        calls.push(await stack.env.currentTimeMs());
        if (calls.length === 1)
          throw ApplicationFailure.create({
            type: FAILURE.windowNotClosedYet,
            nonRetryable: false,
            details: [{ retryInMs: 90_000 }],
            message: 'closes in 89 s by this worker clock',
          });
        return processed(i.key);
      },
    },
    (taskQueue) => run(taskQueue, w),
  );
  assert.equal(result.outcome, 'processed', 'a wait, never a failure');
  assert.equal(calls.length, 2);
  assert.ok(calls[1]! - calls[0]! >= 90_000, `called again after ${calls[1]! - calls[0]!} ms`);
});
