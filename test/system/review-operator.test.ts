// Review of issue 8 items 15-19: reruns, approvals and the page at their edges, on the real
// server over real HTTP.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { sql } from 'kysely';
import pg from 'pg';
import { rerunActivities } from '../../activities/rerun.js';
import { decide as decideRequest, NotAWindowStart, requestRerun } from '../../operator/reruns.js';
import { loadConfig } from '../../config/env.js';
import { defineCatalog } from '../../schedules/define.js';
import type { RerunResult } from '../../contract/workflows.js';
import { insertOrders, reference, salesJob, summaryOf } from '../helpers/jobs.js';
import { holding, rerunTools } from '../helpers/reruns.js';
import { historyFromFile } from '../helpers/history.js';
import { eventually, realStack, sharedBundle, uniqueQueue, withWorker } from '../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../helpers/web.js';

const stack = realStack();
const { rerunJob, processWindow, startRerun, waitForRequest, auditOf } = rerunTools(stack);
const TOKEN = 'review-operator-token-1';
const bearer = { authorization: `Bearer ${TOKEN}` };
test('Review of items 15, 19: a rerun the page asks for but the worker refuses is an error on the page, not "ok"', async () => {
  const job = 'review-page-rerun';
  const W = { start: '2026-06-01T10:00:00Z', end: '2026-06-01T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4, { temporal: true });
  const client = stack.env.client;
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog: deps.catalog,
    env: {
      TIDEMARK_TASK_QUEUE: taskQueue,
      TIDEMARK_APPROVERS: 'bob=U0BOB0001',
      TIDEMARK_PEOPLE: 'alice=U0ALICE01',
    },
  });
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      const ask = async (body: Record<string, unknown>) => {
        const r = await fetch(`${web.url}/api/jobs/${job}/rerun`, {
          method: 'POST',
          headers: { ...bearer, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return { status: r.status, body: (await r.json()) as { error?: string; request?: string } };
      };
      // Never processed: the page must say so, as the CLI does.
      const early = await ask({ window: W.start, reason: 'x', by: 'alice' });
      assert.equal(early.status, 409, `not processed yet: ${JSON.stringify(early.body)}`);
      assert.match(early.body.error ?? '', /has not been processed/);

      await processWindow(taskQueue, job, W);
      // Issue 11: a time inside a window is refused before any workflow starts, naming the window.
      const inside = await ask({ window: '2026-06-01T10:30:00Z', reason: 'x', by: 'alice' });
      assert.equal(inside.status, 400, JSON.stringify(inside.body));
      assert.match(
        inside.body.error ?? '',
        /^window: 2026-06-01T10:30:00Z is not the start of a window of review-page-rerun .*\[2026-06-01T10:00:00Z, 2026-06-01T11:00:00Z\)/,
      );
      const now = new Date('2026-06-03T00:00:00Z');
      const config = loadConfig({ TIDEMARK_TASK_QUEUE: taskQueue, TIDEMARK_PEOPLE: 'alice=U0ALICE01' });
      const at = { job: deps.catalog.get(job), reason: 'x', requestedBy: 'alice', now };
      await assert.rejects(
        requestRerun(client, config, { ...at, windowStart: new Date('2026-06-01T10:30:00Z') }),
        NotAWindowStart,
      );
      await assert.rejects(
        client.workflow.getHandle(`${job}/2026-06-01T10:30:00Z/rerun-2026-06-03T00:00:00Z`).describe(),
        WorkflowNotFoundError,
        'no workflow was started for it',
      );
      const first = await ask({ window: W.start, reason: 'first', by: 'alice' });
      assert.equal(first.status, 200, first.body.error);
      const second = await ask({ window: W.start, reason: 'second', by: 'alice' });
      assert.equal(second.status, 409, `a second open request: ${JSON.stringify(second.body)}`);
      assert.match(second.body.error ?? '', /already open/);
      await client.workflow.getHandle(first.body.request!).terminate('test over');
    });
  } finally {
    await web.stop();
  }
});

test('Review of item 15: an approved request whose workflow ended does not hold its window for ever', async () => {
  const job = 'review-approved-ended';
  const W = { start: '2026-06-02T10:00:00Z', end: '2026-06-02T11:00:00Z' };
  const { taskQueue, orders, deps } = await rerunJob(job, W, 5, { temporal: true });
  const client = stack.env.client;
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const late = await insertOrders(stack.t.db, [
      { key: `${job}-late`, at: '2026-06-02T10:30:00Z', amount: 40 },
    ]);
    const start = (n: number) => startRerun(taskQueue, job, W, n);
    const first = await start(1);
    await waitForRequest(first.workflowId);
    // Generation 1's window run blocks on the job's watermark row (its commit takes it), so the
    // request stays approved (not done) until the operator has terminated it, however fast or slow
    // the machine is. Not on the summary rows: the approval's preview runs the handler, which
    // writes them, and would wait as well.
    const hold = new pg.Client({ connectionString: stack.t.url });
    await hold.connect();
    await hold.query('begin');
    await hold.query('select 1 from job_watermarks where job = $1 for update', [job]);
    await first.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'cli' }] });
    await eventually(
      async () =>
        (
          await stack.t.db
            .selectFrom('rerun_requests')
            .select('status')
            .where('workflow_id', '=', first.workflowId)
            .executeTakeFirst()
        )?.status === 'approved' || undefined,
      20_000,
      'approved',
    );
    // An operator terminates the request's workflow (its window run, abandoned, goes on or not).
    await first.terminate('operator cleanup');
    await hold.query('commit');
    await hold.end();
    const child = client.workflow.getHandle(`${job}/${W.start}#1`);
    await eventually(
      async () => {
        const d = await child.describe().catch(() => undefined);
        return !d || d.status.name !== 'RUNNING' ? true : undefined;
      },
      30_000,
      'the abandoned generation 1 to end',
    );
    const second = await start(2);
    const state = await waitForRequest(second.workflowId);
    assert.equal(state.request!.window.generation, 2);
    await second.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'cli' }] });
    assert.equal(((await second.result()) as RerunResult).outcome, 'done');
    const ref = reference([...orders, ...late], W.start, W.end);
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
  });
});

test('Review of item 15: one request recorded by two overlapping attempts is one request, not refused by itself', async () => {
  const job = 'review-same-request';
  const W = { start: '2026-06-04T10:00:00Z', end: '2026-06-04T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 2, { temporal: true });
  const client = stack.env.client;
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    // A retried attempt of the request's activity overlapping the first (its first attempt's
    // result was lost, or it hung past its timeout): both record the same workflow's request.
    const acts = rerunActivities(deps);
    const workflowId = `${job}/${W.start}/rerun-once`;
    const input = { job, windowStart: W.start, reason: 'y', requestedBy: 'alice', workflowId };
    // The request's workflow is running (on a queue nobody polls, so only these attempts act for it).
    const idle = await client.workflow.start('rerun', {
      taskQueue: uniqueQueue('nobody'),
      workflowId,
      args: [{ job, windowStart: W.start, reason: 'y', requestedBy: 'alice', approvers: ['bob'] }],
    });
    const both = await Promise.allSettled([acts.requestRerun(input), acts.requestRerun(input)]);
    assert.deepEqual(
      both.map((b) => (b.status === 'fulfilled' ? b.value.window.generation : String(b.reason))),
      [1, 1],
    );
    await idle.terminate('test over');
  });
});

test('Review of item 17: a decision before the request is recorded is refused, so a refused request has no accepted approval', async () => {
  const job = 'review-early-decision';
  const W = { start: '2026-06-05T10:00:00Z', end: '2026-06-05T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 2, { temporal: true });
  const client = stack.env.client;
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const start = (n: number) => startRerun(taskQueue, job, W, n);
    const open = await start(1);
    await waitForRequest(open.workflowId);
    // Hold the window's request lock, so the second request is not recorded yet when bob decides.
    const release = await holding(stack.t.db, (trx) =>
      sql`select pg_advisory_xact_lock(hashtext(${`rerun:${job}/${W.start}`}))`.execute(trx),
    );
    const second = await start(2);
    let early: string;
    try {
      early = await decideRequest(client, stack.t.db, second.workflowId, {
        decision: 'approve',
        by: 'bob',
        source: 'cli',
      }).then(
        () => 'accepted',
        (e: Error) => e.message,
      );
    } finally {
      await release();
    }
    await assert.rejects(second.result());
    const audit = await auditOf(second.workflowId);
    assert.deepEqual(
      audit.filter((a) => a.accepted),
      [],
      `an approval accepted for a request that was refused (${early})`,
    );
    assert.match(early, /not recorded yet/);
    await open.terminate('test over');
  });
});

test('Review of item 17: a decision on a request that has already timed out (its workflow closed) is refused and audited', async () => {
  const job = 'review-closed-decision';
  const W = { start: '2026-06-06T10:00:00Z', end: '2026-06-06T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 2, { temporal: true });
  const client = stack.env.client;
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const handle = await startRerun(taskQueue, job, W, 'closed', { timeoutMs: 1_000 });
    const id = handle.workflowId;
    assert.equal(((await handle.result()) as RerunResult).outcome, 'timed-out');
    const late = await decideRequest(client, stack.t.db, id, {
      decision: 'approve',
      by: 'bob',
      source: 'cli',
    }).then(
      () => 'accepted',
      (e: Error) => `${e.constructor.name}: ${e.message}`,
    );
    assert.match(late, /^DecisionRefused: approve by bob refused: the request timed out/);
    const audit = await auditOf(id);
    assert.deepEqual(audit, [{ actor: 'bob', accepted: false }]);
  });
});

test('Review of item 19: a body over the limit is a 413 that closes its connection, so the next request does not fail', async () => {
  const job = 'review-big-body';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-07T00:00:00Z', lateness: '0m' })]);
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog,
    env: { TIDEMARK_TASK_QUEUE: uniqueQueue(job) },
  });
  try {
    const post = async (body: string | Buffer) => {
      const r = await fetch(`${web.url}/api/jobs/${job}/backfill`, {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json' },
        body,
      });
      return { status: r.status, connection: r.headers.get('connection'), text: await r.text() };
    };
    for (let i = 0; i < 3; i++) {
      const big = await post(Buffer.alloc(200_000, 0x20));
      assert.equal(big.status, 413, big.text);
      assert.equal(big.connection, 'close');
      const next = await post('{"from": "x", "to": "y"}').catch((e: Error) => ({
        status: 0,
        connection: null,
        text: String(e.cause ?? e),
      }));
      assert.equal(next.status, 400, `the request after a 413: ${next.text}`);
    }
  } finally {
    await web.stop();
  }
});

test('Review of item 19: the update stream of a session that expires or logs out ends, so the page hears it', async () => {
  const job = 'review-sse';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-08T00:00:00Z', lateness: '0m' })]);
  let now = new Date('2026-11-30T12:00:00Z');
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog,
    env: { TIDEMARK_TASK_QUEUE: uniqueQueue(job), TIDEMARK_WEB_SESSION_TTL: '1h' },
    now: () => now,
  });
  try {
    const cookie = sessionCookie(await postLogin(web.url, TOKEN));
    const events = await fetch(`${web.url}/api/events`, { headers: { cookie } });
    const reader = events.body!.getReader();
    assert.equal((await reader.read()).done, false, 'a first update');
    now = new Date('2026-11-30T13:00:01Z');
    const deadline = Date.now() + 10_000;
    let ended = false;
    while (!ended && Date.now() < deadline)
      ended = await Promise.race([
        reader.read().then((r) => r.done),
        new Promise<boolean>((r) => setTimeout(() => r(false), deadline - Date.now())),
      ]);
    assert.ok(ended, 'the stream of an expired session ended');
  } finally {
    await web.stop();
  }
});

test("Review of items 17, 18: a rerun approved and run before this change replays on today's code", async () => {
  // Recorded on 61971a3 (before items 17 and 18): approved by bob, generation 1 run, done. A worker
  // deployed while such a request is still running must replay it, not fail it for nondeterminism.
  const history = await historyFromFile(
    new URL('../fixtures/rerun-approved-61971a3.history.json', import.meta.url),
  );
  await Worker.runReplayHistory({ workflowBundle: await sharedBundle() }, history);
});
