// The window's activity runs as a local activity when the job neither heartbeats nor waits for
// allowed hours: one workflow task per window instead of two plus an activity task. The job's
// retry policy still decides the attempts; windows started before the change replay unchanged. A
// local attempt that allows one attempt and dies with its worker is not run again.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ActivityFailure, WorkflowFailedError } from '@temporalio/client';
import { RetryState } from '@temporalio/common';
import proto, { type temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { CRASH_POINT } from '../../../activities/crash-points.js';
import { memoryLogger } from '../../../activities/logger.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { defineCatalog } from '../../../schedules/define.js';
import { WINDOW_REVISION, type ActivityPolicy, type WindowRunResult } from '../../../contract/workflows.js';
import { historyFromFile } from '../../helpers/history.js';
import { spawnWorker, type WorkerProcess, workerProcessEnv } from '../../helpers/processes.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../../helpers/jobs.js';
import { realStack, sharedBundle, uniqueQueue, withWorker, eventually } from '../../helpers/temporal.js';
import { hourlyWindow, windowPolicy } from '../../helpers/windows.js';

const stack = realStack();
const EventType = proto.temporal.api.enums.v1.EventType;
const retry = {
  maximumAttempts: 3,
  initialInterval: '100ms',
  maximumInterval: '100ms',
  backoffCoefficient: 1,
};

/** Runs generation 0 of `job`'s hourly window at `start` through Temporal; returns its result and history. */
async function runWindow(taskQueue: string, job: string, start: string, policy: ActivityPolicy) {
  const key = `${job}/${start}`;
  const end = new Date(new Date(start).getTime() + 3_600_000).toISOString().replace('.000Z', 'Z');
  const handle = await stack.env.client.workflow.start('window', {
    taskQueue,
    workflowId: key,
    args: [{ job, start, end, generation: 0, key, trigger: 'manual', policy, revision: WINDOW_REVISION }],
  });
  const result = await (handle.result() as Promise<WindowRunResult>).catch((err: unknown) => err);
  const events = (await handle.fetchHistory()).events ?? [];
  const count = (type: temporal.api.enums.v1.EventType) => events.filter((e) => e.eventType === type).length;
  return {
    key,
    result,
    activityTasks: count(EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
    workflowTasks: count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
    localActivities: events.filter(
      (e) => e.markerRecordedEventAttributes?.markerName === 'core_local_activity',
    ).length,
    patchMarkers: events.filter((e) => e.markerRecordedEventAttributes?.markerName === 'core_patch').length,
    upserts: count(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES),
    events: events.length,
  };
}

async function ledgerRow(key: string) {
  return await stack.t.db
    .selectFrom('job_windows')
    .select(['status', 'attempts'])
    .where('window_key', '=', key)
    .executeTakeFirst();
}

test('a window of a job that neither heartbeats nor waits for hours: one workflow task, no activity task', async () => {
  const job = 'local-sales';
  const catalog = defineCatalog([salesJob(job, { start: '2026-07-01T00:00:00Z' })]);
  const taskQueue = uniqueQueue(job);
  const orders = await insertOrders(
    stack.t.db,
    ordersBetween(job, '2026-07-01T00:00:00Z', '2026-07-01T01:00:00Z', 30),
  );
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const run = await runWindow(taskQueue, job, '2026-07-01T00:00:00Z', {
        retry,
        startToCloseTimeoutMs: 10_000,
      });
      assert.equal((run.result as WindowRunResult).outcome, 'processed');
      assert.deepEqual(
        {
          activityTasks: run.activityTasks,
          localActivities: run.localActivities,
          workflowTasks: run.workflowTasks,
        },
        { activityTasks: 0, localActivities: 1, workflowTasks: 1 },
      );
      // Its revision says which shape it took: no patch marker, none of their TemporalChangeVersion
      // upserts (visibility writes). Started, task scheduled/started/completed, local activity, completed.
      assert.deepEqual(
        { patchMarkers: run.patchMarkers, upserts: run.upserts, events: run.events },
        { patchMarkers: 0, upserts: 0, events: 6 },
      );
      const ref = reference(orders, '2026-07-01T00:00:00Z', '2026-07-01T01:00:00Z');
      assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
      assert.deepEqual(await ledgerRow(run.key), { status: 'done', attempts: 1 });

      // Presented again, the ledger answers: already done, nothing applied twice.
      const again = await runWindow(taskQueue, job, '2026-07-01T00:00:00Z', {
        retry,
        startToCloseTimeoutMs: 10_000,
      });
      assert.equal((again.result as WindowRunResult).outcome, 'already-done');
      assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
    },
  );
});

test("a local window's attempts follow the job's retry policy: retried while attempts remain, then failed", async () => {
  const job = 'local-retry';
  let calls = 0;
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-07-02T00:00:00Z',
      handler: async (ctx) => {
        calls++;
        if (ctx.attempt === 1) throw new Error('the first attempt fails');
        return await summariseWindow(ctx);
      },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const twice = await runWindow(taskQueue, job, '2026-07-02T00:00:00Z', {
        retry: { ...retry, maximumAttempts: 2 },
        startToCloseTimeoutMs: 10_000,
      });
      assert.equal((twice.result as WindowRunResult).outcome, 'processed');
      assert.equal(twice.localActivities, 1);
      assert.deepEqual(await ledgerRow(twice.key), { status: 'done', attempts: 2 });
      assert.equal(calls, 2);

      const once = await runWindow(taskQueue, job, '2026-07-02T01:00:00Z', {
        retry: { ...retry, maximumAttempts: 1 },
        startToCloseTimeoutMs: 10_000,
      });
      assert.ok(once.result instanceof WorkflowFailedError, String(once.result));
      // The run fails as it does with a regular activity: an activity failure, saying why it stopped.
      assert.ok(once.result.cause instanceof ActivityFailure, String(once.result.cause));
      assert.equal(once.result.cause.retryState, RetryState.MAXIMUM_ATTEMPTS_REACHED);
      assert.equal(once.result.cause.cause?.message, 'the first attempt fails');
      assert.equal(calls, 3, 'one attempt only');
      assert.equal((await ledgerRow(once.key))?.status, 'failed');
    },
  );
});

test('a job that heartbeats, waits for allowed hours, or has attempts under 10 s or over 10 min keeps a regular activity', async () => {
  const job = 'remote-sales';
  const catalog = defineCatalog([salesJob(job, { start: '2026-07-03T00:00:00Z' })]);
  const taskQueue = uniqueQueue(job);
  const hour = new Date().getUTCHours();
  const hh = (h: number) => `${String((h + 24) % 24).padStart(2, '0')}:00`;
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const heartbeats = await runWindow(taskQueue, job, '2026-07-03T00:00:00Z', {
        retry,
        startToCloseTimeoutMs: 10_000,
        heartbeatTimeoutMs: 5_000,
      });
      const hours = await runWindow(taskQueue, job, '2026-07-03T01:00:00Z', {
        retry,
        startToCloseTimeoutMs: 10_000,
        allowedHours: { from: hh(hour - 1), to: hh(hour + 2), timezone: 'UTC' },
      });
      // A lost local attempt waits for the workflow task's timeout (10 s): a job that asked for less keeps its own.
      const short = await runWindow(taskQueue, job, '2026-07-03T02:00:00Z', {
        retry,
        startToCloseTimeoutMs: 5_000,
      });
      // A local attempt adds workflow-task heartbeats to the history (~22 events a minute): one allowed
      // to run for days could reach the history's limit, and the window be terminated unalerted.
      const long = await runWindow(taskQueue, job, '2026-07-03T03:00:00Z', {
        retry,
        startToCloseTimeoutMs: 2 * 86_400_000,
      });
      for (const run of [heartbeats, hours, short, long]) {
        assert.equal((run.result as WindowRunResult).outcome, 'processed');
        assert.equal(run.localActivities, 0);
        assert.ok(run.activityTasks >= 1);
      }
    },
  );
});

test('a worker killed in the middle of a local attempt: another worker runs it again within seconds, once', async () => {
  const job = 'local-killed';
  const start = '2026-07-04T00:00:00Z';
  const key = `${job}/${start}`;
  const taskQueue = uniqueQueue(job);
  const orders = await insertOrders(stack.t.db, ordersBetween(job, start, '2026-07-04T01:00:00Z', 25));
  const env = (crashAt?: { point: string; nth: number }): Record<string, string> => ({
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TEST_JOB: JSON.stringify({ name: job, grid: '1h', start, holdMs: 0, ...(crashAt ? { crashAt } : {}) }),
  });
  const doomed = await spawnWorker('doomed', env({ point: CRASH_POINT.inHandler, nth: 1 }));
  // Long enough that the survivor's start (tens of seconds on a loaded machine, counted below)
  // stays well inside half of it: only an attempt's timeout takes longer than that.
  const attemptTimeoutMs = 120_000;
  const run = stack.env.client.workflow.execute('window', {
    taskQueue,
    workflowId: key,
    args: [
      {
        job,
        start,
        end: '2026-07-04T01:00:00Z',
        generation: 0,
        key,
        trigger: 'manual',
        policy: { retry, startToCloseTimeoutMs: attemptTimeoutMs },
      },
    ],
  }) as Promise<WindowRunResult>;
  await new Promise<void>((r) => doomed.child.once('exit', () => r()));
  assert.equal(doomed.child.signalCode, 'SIGKILL', doomed.output());
  const died = Date.now();
  const survivor = await spawnWorker('survivor', env());
  try {
    const result = await run;
    const tookMs = Date.now() - died;
    assert.equal(result.outcome, 'processed');
    // The workflow task's timeout, not the attempt's, brought the window back.
    assert.ok(tookMs < attemptTimeoutMs / 2, `done ${tookMs} ms after the kill`);
    const ref = reference(orders, start, '2026-07-04T01:00:00Z');
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
    assert.equal((await ledgerRow(key))?.status, 'done');
    assert.equal(
      survivor
        .output()
        .split('\n')
        .filter((l) => l.includes(`PROCESSED job=${job}`)).length,
      1,
    );
  } finally {
    await survivor.stop();
  }
});

// 0dd8bbd: a regular activity, no marker. 4020cb1: a marker per change. 8a01876: a window started
// with a revision (by a starter on today's code) that a worker on code before revisions ran, recording
// its markers anyway (a rolling deploy).
test('windows run on 0dd8bbd (done or still running), 4020cb1 and 8a01876 replay on this code', async () => {
  for (const name of [
    'window-done-0dd8bbd',
    'window-running-0dd8bbd',
    'window-done-4020cb1',
    'window-revision-done-8a01876',
  ]) {
    const history = await historyFromFile(new URL(`../../fixtures/${name}.history.json`, import.meta.url));
    await Worker.runReplayHistory({ workflowBundle: await sharedBundle() }, history);
  }
});

// A window that allows one attempt, run locally, whose worker is SIGKILLed mid-attempt. On a Temporal
// namespace and database of its own.
describe('a local attempt allowing one attempt, lost with its worker', () => {
  const stack = realStack();

  const exited = (w: WorkerProcess) => w.child.signalCode !== null || w.child.exitCode !== null;

  test('a local window attempt allowing one attempt, lost with its worker: not run again on the next worker, the window fails', async () => {
    const job = 'rv-once';
    const start = '2026-07-04T00:00:00Z';
    const end = '2026-07-04T01:00:00Z';
    const key = `${job}/${start}`;
    const taskQueue = uniqueQueue(job);
    await insertOrders(stack.t.db, ordersBetween(job, start, end, 10));
    // Every worker that reaches the handler of this window dies there (a poison window: say it runs
    // the worker out of memory). The job allows one attempt.
    const env = workerProcessEnv(stack, taskQueue, {
      name: job,
      grid: '1h',
      start,
      holdMs: 0,
      crashAt: { point: CRASH_POINT.inHandler, nth: 1 },
    });
    const workers: WorkerProcess[] = [];
    try {
      const first = await spawnWorker('rv-once-1', env);
      workers.push(first);
      const run = stack.env.client.workflow
        .execute('window', {
          taskQueue,
          workflowId: key,
          args: [hourlyWindow(job, Date.parse(start), 0, windowPolicy(1, 15_000))],
        })
        .then(
          (r: WindowRunResult) => ({ ok: r }),
          (err: unknown) => ({ err }),
        );
      await eventually(async () => (exited(first) ? true : undefined), 60_000, 'the first worker to die');
      assert.match(first.output(), /CRASH point=inHandler/);
      const second = await spawnWorker('rv-once-2', env);
      workers.push(second);
      // One attempt was allowed and it was spent: the window ends failed (its attempt timed out, as a
      // regular activity's does) and alerts; the second worker never runs the handler.
      const secondDied = eventually(async () => (exited(second) ? 'died' : undefined), 120_000, 'x').catch(
        () => 'alive',
      );
      const outcome = await Promise.race([run, secondDied]);
      assert.notEqual(outcome, 'died', `the handler ran again on the next worker:\n${second.output()}`);
      assert.ok('err' in (outcome as object), JSON.stringify(outcome));
      assert.ok((outcome as { err: unknown }).err instanceof WorkflowFailedError);
      assert.doesNotMatch(second.output(), /CRASH point=inHandler/);
      // Recorded and alerted as a failed window, not left running.
      const row = await stack.t.db
        .selectFrom('job_windows')
        .select(['status', 'reason'])
        .where('window_key', '=', key)
        .executeTakeFirstOrThrow();
      assert.equal(row.status, 'failed');
      assert.match(row.reason ?? '', /lost with their worker/);
      const incidents = await stack.t.db
        .selectFrom('incidents')
        .select(['subject', 'kind'])
        .where('job', '=', job)
        .execute();
      assert.deepEqual(
        incidents.map((i) => ({ ...i })),
        [{ subject: key, kind: 'window-failed' }],
      );
    } finally {
      for (const w of workers) await w.stop('SIGKILL');
    }
  });
});
