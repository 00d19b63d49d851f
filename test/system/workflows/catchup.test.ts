// Catch-up cap and lateness on the real server: 30 missed windows with cap 10 take three
// ticks, oldest first, none lost; an open or not-yet-late window is never processed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ActivityFailure, ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { RetryState } from '@temporalio/common';
import { createActivities } from '../../../activities/index.js';
import { memoryLogger } from '../../../activities/logger.js';
import { readWatermark } from '../../../db/ledger.js';
import { type Catalog } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { TickResult, WindowInput, WindowResult } from '../../../contract/workflows.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../../helpers/jobs.js';
import { realStack, uniqueQueue, windowPolicy, withWorker } from '../../helpers/temporal.js';

const stack = realStack();

/** Worker deps for `catalog` on a clock that is `now` (the wall clock unless given). */
const depsFor = (catalog: Catalog, now: () => Date = () => new Date()) => ({
  db: stack.t.db,
  catalog,
  logger: memoryLogger(),
  now,
});

/** Generation 0 of `job`'s window [start, end), run with three attempts. */
const windowInput = (job: string, start: string, end: string, trigger: 'manual' | 'schedule') => ({
  job,
  start,
  end,
  generation: 0,
  key: `${job}/${start}`,
  trigger,
  policy: windowPolicy(3, 10_000),
});

/** Runs tick `n` of `job` at `now`, and waits for every window it started to end. */
async function tickAndWait(taskQueue: string, job: string, now: string, n: number) {
  const r = (await stack.env.client.workflow.execute('tick', {
    taskQueue,
    workflowId: `${job}/tick-${n}`,
    args: [{ job, now }],
  })) as TickResult;
  const settled = await Promise.allSettled(
    r.started.map((k) => stack.env.client.workflow.getHandle(k).result()),
  );
  return { started: r.started, settled };
}

/** A window run on a worker whose clock was behind raised no incident (so no alert). */
async function assertNoIncidents(job: string) {
  const incidents = await stack.t.db.selectFrom('incidents').selectAll().where('job', '=', job).execute();
  assert.deepEqual(incidents, [], 'no incident, no alert');
}

test('30 missed windows with cap 10: three ticks, oldest first, none lost', async () => {
  const job = 'catchup';
  const catalog = defineCatalog([
    salesJob(job, { grid: '15m', lateness: '2m', maxCatchUp: 10, start: '2026-05-01T00:00:00Z' }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withWorker(stack.env, taskQueue, depsFor(catalog), async () => {
    // 30 windows of 15 minutes: 00:00 to 07:30; one more order in the open window after them.
    const orders = await insertOrders(
      stack.t.db,
      ordersBetween(job, '2026-05-01T00:00:00Z', '2026-05-01T07:40:00Z', 310, 31),
    );
    const now = '2026-05-01T07:32:00Z';
    const seen: string[] = [];
    for (let i = 1; i <= 3; i++) {
      const r = (await stack.env.client.workflow.execute('tick', {
        taskQueue,
        workflowId: `${job}/tick-${i}`,
        args: [{ job, now }],
      })) as TickResult;
      assert.equal(r.started.length, 10, `tick ${i} started ${r.started.length}`);
      const results = await Promise.all(
        r.started.map((k) => stack.env.client.workflow.getHandle(k).result() as Promise<WindowResult>),
      );
      assert.ok(results.every((x) => x.outcome === 'processed'));
      seen.push(...r.started);
    }
    const expected = Array.from(
      { length: 30 },
      (_, i) =>
        `${job}/${new Date(Date.parse('2026-05-01T00:00:00Z') + i * 900_000).toISOString().replace('.000Z', 'Z')}`,
    );
    assert.deepEqual(seen, expected, 'oldest first, each window once');
    const fourth = (await stack.env.client.workflow.execute('tick', {
      taskQueue,
      workflowId: `${job}/tick-4`,
      args: [{ job, now }],
    })) as TickResult;
    assert.deepEqual(fourth.started, []);
    assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), '2026-05-01T07:30:00.000Z');
    const ref = reference(orders, '2026-05-01T00:00:00Z', '2026-05-01T07:30:00Z');
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
  });
});

test('lateness: a window is not started before end + lateness, and a tick at that instant starts it', async () => {
  const job = 'late';
  const catalog = defineCatalog([
    salesJob(job, { grid: '1h', lateness: '10m', start: '2026-05-02T10:00:00Z' }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withWorker(stack.env, taskQueue, depsFor(catalog), async () => {
    const tick = (now: string, n: number) =>
      stack.env.client.workflow.execute('tick', {
        taskQueue,
        workflowId: `${job}/tick-${n}`,
        args: [{ job, now }],
      }) as Promise<TickResult>;
    assert.deepEqual((await tick('2026-05-02T10:59:59Z', 1)).started, [], 'open window');
    assert.deepEqual((await tick('2026-05-02T11:09:59Z', 2)).started, [], 'closed but not late enough');
    const r = await tick('2026-05-02T11:10:00Z', 3);
    assert.deepEqual(r.started, [`${job}/2026-05-02T10:00:00Z`]);
    await stack.env.client.workflow.getHandle(r.started[0]!).result();
  });
});

test('a window that is open by the wall clock is refused, not retried, and writes nothing', async () => {
  const job = 'open-now';
  const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '5m' })]);
  const now = new Date('2026-05-03T10:30:00Z');
  const acts = createActivities(depsFor(catalog, () => now));
  const input = windowInput(job, '2026-05-03T10:00:00Z', '2026-05-03T11:00:00Z', 'manual');
  await assert.rejects(
    acts.processWindow(input),
    (err: unknown) =>
      err instanceof ApplicationFailure &&
      err.nonRetryable &&
      err.type === 'WindowNotClosed' &&
      /11:05:00Z/.test(err.message),
  );
  const rows = await stack.t.db.selectFrom('job_windows').selectAll().where('job', '=', job).execute();
  assert.equal(rows.length, 0);

  // Through Temporal with the real clock: a window in the future fails at once, one attempt.
  const taskQueue = uniqueQueue(job);
  await withWorker(stack.env, taskQueue, depsFor(catalog), async () => {
    const start = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 + 3_600_000);
    const key = `${job}/${start.toISOString().replace('.000Z', 'Z')}`;
    await assert.rejects(
      stack.env.client.workflow.execute('window', {
        taskQueue,
        workflowId: key,
        args: [
          {
            ...input,
            start: start.toISOString(),
            end: new Date(start.getTime() + 3_600_000).toISOString(),
            key,
          },
        ],
      }),
      (err: unknown) =>
        err instanceof WorkflowFailedError &&
        err.cause instanceof ActivityFailure &&
        err.cause.retryState === RetryState.NON_RETRYABLE_FAILURE &&
        err.cause.cause instanceof ApplicationFailure &&
        err.cause.cause.type === 'WindowNotClosed',
    );
    const summary = await summaryOf(stack.t.db, job);
    assert.deepEqual(summary, { count: 0, totalCents: 0 });
  });
});

test('a window off the grid is refused with the window it should have been', async () => {
  const job = 'off-grid';
  const acts = createActivities(depsFor(defineCatalog([salesJob(job)])));
  await assert.rejects(
    acts.processWindow({
      job,
      start: '2026-05-03T10:30:00Z',
      end: '2026-05-03T11:30:00Z',
      generation: 0,
      key: 'x',
      trigger: 'manual',
      policy: windowPolicy(1, 1000),
    }),
    (err: unknown) =>
      err instanceof ApplicationFailure &&
      err.type === 'BadWindow' &&
      /\[2026-05-03T10:00:00Z, 2026-05-03T11:00:00Z\)/.test(err.message),
  );
  await assert.rejects(
    acts.planTick({ job: 'nope', now: '2026-05-03T10:00:00Z' }),
    (err: unknown) =>
      err instanceof ApplicationFailure && err.type === 'UnknownJob' && /off-grid/.test(err.message),
  );
});

test('a failing window holds the watermark; windows after it still run; once fixed it catches up', async () => {
  const job = 'hold';
  let broken = true;
  const catalog = defineCatalog([
    salesJob(job, {
      grid: '1h',
      lateness: '0m',
      start: '2026-05-04T10:00:00Z',
      retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms' },
      handler: async (ctx) => {
        if (broken && ctx.window.start.toISOString() === '2026-05-04T11:00:00.000Z')
          throw new Error('source system down');
        return await summariseWindow(ctx);
      },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withWorker(stack.env, taskQueue, depsFor(catalog), async () => {
    const tick = async (n: number) => (await tickAndWait(taskQueue, job, '2026-05-04T13:00:00Z', n)).settled;
    const first = await tick(1);
    assert.deepEqual(
      first.map((s) => s.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.equal(
      (await readWatermark(stack.t.db, job))?.toISOString(),
      '2026-05-04T11:00:00.000Z',
      'the watermark stops before the failed window',
    );
    const failed = await stack.t.db
      .selectFrom('job_windows')
      .select(['status', 'attempts', 'reason'])
      .where('job', '=', job)
      .where('window_start', '=', new Date('2026-05-04T11:00:00Z'))
      .executeTakeFirstOrThrow();
    assert.deepEqual(failed, { status: 'failed', attempts: 2, reason: 'source system down' });

    broken = false;
    const second = await tick(2);
    assert.deepEqual(
      second.map((s) => s.status),
      ['fulfilled'],
      'only the failed window is started again',
    );
    assert.equal(
      (await readWatermark(stack.t.db, job))?.toISOString(),
      '2026-05-04T13:00:00.000Z',
      'the watermark jumps over the contiguous done windows',
    );
  });
});

test('clock skew: a window not closed by under a minute on the worker clock waits and retries, never fails or alerts', async () => {
  const job = 'skewed';
  const catalog = defineCatalog([salesJob(job, { grid: '1m', lateness: '10s' })]);
  // Directly: 30 s short of closing is a retryable wait with a delay that covers the rest.
  const acts = createActivities(depsFor(catalog, () => new Date('2026-05-03T10:01:40Z')));
  const input = windowInput(job, '2026-05-03T10:01:00Z', '2026-05-03T10:02:00Z', 'schedule');
  await assert.rejects(
    acts.processWindow(input),
    (err: unknown) =>
      err instanceof ApplicationFailure &&
      !err.nonRetryable &&
      err.type === 'WindowNotClosedYet' &&
      typeof err.nextRetryDelay === 'number' &&
      err.nextRetryDelay >= 30_000 &&
      err.nextRetryDelay <= 32_000,
  );
  // A minute or more short of closing is still bad input (the 'open-now' test: not retried).
  const far = createActivities(depsFor(catalog, () => new Date('2026-05-03T10:01:09Z')));
  await assert.rejects(
    far.processWindow(input),
    (err: unknown) => err instanceof ApplicationFailure && err.nonRetryable && err.type === 'WindowNotClosed',
  );

  // Through Temporal: the worker's clock is 3 s behind the time at which the window was due;
  // with attempts to spare (the activity's retry waits) and with none (the workflow waits).
  for (const maximumAttempts of [2, 1]) {
    const name = `${job}-${maximumAttempts}`;
    const taskQueue = uniqueQueue(name);
    const due = Math.floor(Date.now() / 60_000) * 60_000 - 60_000 + 10_000;
    const skew = Date.now() - due + 3_000;
    await withWorker(
      stack.env,
      taskQueue,
      depsFor(
        defineCatalog([salesJob(name, { grid: '1m', lateness: '10s' })]),
        () => new Date(Date.now() - skew),
      ),
      async () => {
        const start = new Date(due - 10_000 - 60_000);
        const key = `${name}/${start.toISOString().replace('.000Z', 'Z')}`;
        const result = (await stack.env.client.workflow.execute('window', {
          taskQueue,
          workflowId: key,
          args: [
            {
              ...input,
              job: name,
              start: start.toISOString(),
              end: new Date(start.getTime() + 60_000).toISOString(),
              key,
              policy: { ...input.policy, retry: { ...input.policy.retry, maximumAttempts } },
            },
          ],
        })) as WindowResult;
        assert.equal(result.outcome, 'processed', `maximumAttempts ${maximumAttempts}`);
        const row = await stack.t.db
          .selectFrom('job_windows')
          .select(['status', 'attempts'])
          .where('window_key', '=', key)
          .executeTakeFirstOrThrow();
        assert.deepEqual(row, { status: 'done', attempts: 1 }, 'the wait is not a failed attempt');
        await assertNoIncidents(job);
      },
    );
  }
});

test('a window that keeps failing does not fill the catch-up cap: newer windows start, the watermark and the incident stay', async () => {
  const job = 'stall';
  const failing = '2026-05-05T10:00:00.000Z';
  const catalog = defineCatalog([
    salesJob(job, {
      grid: '1h',
      lateness: '0m',
      maxCatchUp: 1,
      start: '2026-05-05T10:00:00Z',
      retry: { maximumAttempts: 1 },
      handler: async (ctx) => {
        if (ctx.window.start.toISOString() === failing) throw new Error('this window always fails');
        return await summariseWindow(ctx);
      },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withWorker(stack.env, taskQueue, depsFor(catalog), async () => {
    const tick = async (n: number) => (await tickAndWait(taskQueue, job, '2026-05-05T13:00:00Z', n)).started;
    assert.deepEqual(await tick(1), [`${job}/2026-05-05T10:00:00Z`]);
    assert.deepEqual(
      await tick(2),
      [`${job}/2026-05-05T10:00:00Z`, `${job}/2026-05-05T11:00:00Z`],
      'the failed window retries outside the cap; the next window starts',
    );
    assert.deepEqual(await tick(3), [`${job}/2026-05-05T10:00:00Z`, `${job}/2026-05-05T12:00:00Z`]);
    const rows = await stack.t.db
      .selectFrom('job_windows')
      .select(['window_start', 'status'])
      .where('job', '=', job)
      .orderBy('window_start')
      .execute();
    assert.deepEqual(
      rows.map((r) => `${r.window_start.toISOString()} ${r.status}`),
      ['2026-05-05T10:00:00.000Z failed', '2026-05-05T11:00:00.000Z done', '2026-05-05T12:00:00.000Z done'],
    );
    assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), failing, 'the watermark is held');
    const incident = await stack.t.db
      .selectFrom('incidents')
      .select(['kind', 'closed_at'])
      .where('job', '=', job)
      .where('subject', '=', `${job}/2026-05-05T10:00:00Z`)
      .executeTakeFirstOrThrow();
    assert.deepEqual(incident, { kind: 'window-failed', closed_at: null }, 'the incident stays open');
  });
});

/**
 * Runs the minute window ending at `end` (ms) of a new 1-minute job through Temporal, on a worker
 * whose clock is `workerNow`, with one attempt; returns its result once it is done.
 */
async function runMinuteWindow(
  name: string,
  end: number,
  trigger: WindowInput['trigger'],
  workerNow: () => Date = () => new Date(),
): Promise<WindowResult> {
  const taskQueue = uniqueQueue(name);
  const start = new Date(end - 60_000);
  const key = `${name}/${start.toISOString().replace('.000Z', 'Z')}`;
  const catalog = defineCatalog([salesJob(name, { grid: '1m', lateness: '0s' })]);
  return await withWorker(stack.env, taskQueue, depsFor(catalog, workerNow), async () => {
    const args = [
      {
        job: name,
        start: start.toISOString(),
        end: new Date(end).toISOString(),
        generation: 0,
        key,
        trigger,
        policy: windowPolicy(1, 10_000),
      },
    ];
    return (await stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId: key,
      args,
    })) as WindowResult;
  });
}

test('a window called up to a minute before it closes (by every clock) with one attempt waits as long as asked, then processes', async () => {
  // The workflow must sleep for as long as the activity asked (the failure's delay), not a guess:
  // a short fixed sleep spends the workflow's few tries long before the window closes. (A worker
  // whose clock alone is behind does not wait: the server's clock says closed, next test.)
  // The window closes at the next minute, 5 to 55 s from the call.
  if (60_000 - (Date.now() % 60_000) > 55_000) await new Promise((r) => setTimeout(r, 6_000));
  if (60_000 - (Date.now() % 60_000) < 5_000) await new Promise((r) => setTimeout(r, 6_000));
  const end = Math.ceil(Date.now() / 60_000) * 60_000;
  assert.equal((await runMinuteWindow('skew-45s', end, 'manual')).outcome, 'processed');
  assert.ok(Date.now() >= end, 'processed only once closed');
  await assertNoIncidents('skew-45s');
});

test('a worker clock over a minute behind the server: a window the server closed waits for the worker to agree, never fails for good', async () => {
  // Over the minute of tolerance the worker's clock alone would call the window open (bad input,
  // not retried, alerted); the window workflow's time is the Temporal server's, by which it closed.
  // It is processed once both clocks say closed: here when the worker's, 62 s behind, gets there.
  const end = Math.floor(Date.now() / 60_000) * 60_000;
  const skew = Date.now() - end + 62_000;
  const workerNow = () => new Date(Date.now() - skew);
  assert.equal((await runMinuteWindow('skew-62s', end, 'schedule', workerNow)).outcome, 'processed');
  assert.ok(workerNow().getTime() >= end, "processed once closed by the worker's clock too");
  await assertNoIncidents('skew-62s');
});

test('the failed-window budget rotates: a window that keeps failing does not keep a newer failed window from retrying', async () => {
  // Cap 1: 10:00 always fails; 11:00 fails once (a transient error) and would succeed now. The
  // retries have a budget of their own, so they must take turns (least recently tried first),
  // or 11:00 waits behind 10:00 for as long as 10:00 fails.
  const job = 'rotate';
  const failsOnce = new Set(['2026-05-06T11:00:00.000Z']);
  const catalog = defineCatalog([
    salesJob(job, {
      grid: '1h',
      lateness: '0m',
      maxCatchUp: 1,
      start: '2026-05-06T10:00:00Z',
      handler: async (ctx) => {
        const start = ctx.window.start.toISOString();
        if (start === '2026-05-06T10:00:00.000Z') throw new Error('this window always fails');
        if (failsOnce.delete(start)) throw new Error('a transient failure');
        return await summariseWindow(ctx);
      },
    }),
  ]);
  const acts = createActivities(depsFor(catalog));
  const policy = windowPolicy(1, 10_000);
  const planned: string[][] = [];
  for (let i = 0; i < 6; i++) {
    const plan = await acts.planTick({ job, now: '2026-05-06T18:00:00Z' });
    planned.push(plan.windows.map((w) => w.start));
    for (const w of plan.windows)
      await acts.processWindow({ ...w, trigger: 'schedule', policy }).catch(() => undefined);
  }
  const status = await stack.t.db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', job)
    .where('window_start', '=', new Date('2026-05-06T11:00:00Z'))
    .executeTakeFirstOrThrow();
  assert.equal(status.status, 'done', `11:00 never retried; ticks planned ${JSON.stringify(planned)}`);
  assert.equal((await readWatermark(stack.t.db, job))?.toISOString(), '2026-05-06T10:00:00.000Z');
});
