// Reruns on the real server: approval by Update with a validator; an unauthorised user and the
// requester refused and audited; two approvers at once cause one rerun; the new generation
// replaces the earlier one's effect (no double counting); rejected and timed-out are results.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { sql } from 'kysely';
import { memoryLogger } from '../../activities/logger.js';
import { decide as decideRequest, DecisionRefused } from '../../operator/reruns.js';
import { defineCatalog } from '../../schedules/define.js';
import type { RerunDecision, RerunResult, RerunState, WindowRunResult } from '../../contract/workflows.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../helpers/jobs.js';
import { holding, policy, rerunTools } from '../helpers/reruns.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../helpers/temporal.js';

const stack = realStack();
const { rerunJob, processWindow, startRerun, waitForRequest, auditOf } = rerunTools(stack);

/** The reason an Update was refused: the validator's message. */
function refusal(e: unknown): string {
  if (!(e instanceof WorkflowUpdateFailedError)) return `not an update failure: ${String(e)}`;
  return `${(e.cause as Error | undefined)?.message ?? ''} ${e.message}`;
}

test("an approved rerun replaces the window's earlier generation; refusals are audited; two approvers make one rerun", async () => {
  const job = 'rerun-sales';
  const W = { start: '2026-04-10T10:00:00Z', end: '2026-04-10T11:00:00Z' };
  const catalog = defineCatalog([salesJob(job, { start: W.start, lateness: '0m' })]);
  const taskQueue = uniqueQueue(job);
  const orders = await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, 40, 8));
  const client = stack.env.client;
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const key = `${job}/2026-04-10T10:00:00Z`;
      (await client.workflow.execute('window', {
        taskQueue,
        workflowId: key,
        args: [{ job, ...W, generation: 0, key, trigger: 'manual', policy }],
      })) as WindowRunResult;
      // A late correction lands in the window after it was processed.
      const late = await insertOrders(stack.t.db, [
        { key: `${job}-late`, at: '2026-04-10T10:59:00Z', amount: 500 },
      ]);

      const request = await client.workflow.start('rerun', {
        taskQueue,
        workflowId: `${key}/rerun-1`,
        args: [
          {
            job,
            windowStart: W.start,
            reason: 'late correction',
            requestedBy: 'alice',
            approvers: ['bob', 'carol'],
            timeoutMs: 60_000,
          },
        ],
      });
      const state = await eventually(
        async () => {
          const s = await request.query<RerunState>('state');
          return s.request && !s.previewing ? s : undefined;
        },
        60_000,
        'the request and its preview',
      );
      assert.equal(state.request!.window.generation, 1);
      assert.equal(state.request!.window.key, `${key}#1`);

      const decide = (d: RerunDecision) => request.executeUpdate('decide', { args: [d] });
      await assert.rejects(
        decide({ decision: 'approve', by: 'mallory', source: 'cli' }),
        (e: unknown) =>
          /mallory may not decide reruns \(approvers: bob, carol\)/.test(refusal(e)) ||
          assert.fail(refusal(e)),
      );
      await assert.rejects(
        decide({ decision: 'approve', by: 'alice', source: 'cli' }),
        (e: unknown) =>
          /alice asked for this rerun and may not approve it/.test(refusal(e)) || assert.fail(refusal(e)),
      );
      // Two approvers at once: one decision is taken, the other is refused.
      const both = await Promise.allSettled([
        decide({ decision: 'approve', by: 'bob', source: 'slack' }),
        decide({ decision: 'approve', by: 'carol', source: 'slack' }),
      ]);
      assert.deepEqual(both.map((b) => b.status).sort(), ['fulfilled', 'rejected']);
      assert.match(
        refusal((both.find((b) => b.status === 'rejected') as PromiseRejectedResult).reason),
        /already approved by (bob|carol)/,
      );

      const result = (await request.result()) as RerunResult;
      assert.equal(result.outcome, 'done');
      assert.equal(result.window?.outcome, 'processed');
      // No double counting: the summary equals the reference over all orders, the late one included.
      const ref = reference([...orders, ...late], W.start, W.end);
      assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
      const gens = await stack.t.db
        .selectFrom('job_windows')
        .select(['generation', 'status', 'trigger'])
        .where('job', '=', job)
        .orderBy('generation')
        .execute();
      assert.deepEqual(gens, [
        { generation: 0, status: 'done', trigger: 'manual' },
        { generation: 1, status: 'done', trigger: 'rerun' },
      ]);
      const audit = await stack.t.db
        .selectFrom('approval_audit')
        .select(['actor', 'decision', 'accepted', 'source'])
        .where('request', '=', `${key}/rerun-1`)
        .execute();
      assert.equal(audit.length, 1, 'the accepted decision is audited by the workflow');
      const req = await stack.t.db
        .selectFrom('rerun_requests')
        .selectAll()
        .where('workflow_id', '=', `${key}/rerun-1`)
        .executeTakeFirstOrThrow();
      assert.deepEqual([req.status, req.requested_by, req.generation], ['done', 'alice', 1]);

      // A rejection and a timeout are results, and run nothing.
      const rejected = await client.workflow.start('rerun', {
        taskQueue,
        workflowId: `${key}/rerun-2`,
        args: [{ job, windowStart: W.start, reason: 'again?', requestedBy: 'alice', approvers: ['bob'] }],
      });
      await eventually(
        async () => ((await rejected.query<RerunState>('state')).request ? true : undefined),
        20_000,
        'the second request',
      );
      await rejected.executeUpdate('decide', {
        args: [{ decision: 'reject', by: 'bob', note: 'not needed', source: 'cli' }],
      });
      assert.equal(((await rejected.result()) as RerunResult).outcome, 'rejected');
      const timedOut = (await client.workflow.execute('rerun', {
        taskQueue,
        workflowId: `${key}/rerun-3`,
        args: [
          {
            job,
            windowStart: W.start,
            reason: 'nobody answers',
            requestedBy: 'alice',
            approvers: ['bob'],
            timeoutMs: 1_000,
          },
        ],
      })) as RerunResult;
      assert.equal(timedOut.outcome, 'timed-out');
      assert.equal(
        (await stack.t.db.selectFrom('job_windows').select('generation').where('job', '=', job).execute())
          .length,
        2,
        'nothing else ran',
      );
    },
  );
});

test('a window that was never processed cannot be rerun', async () => {
  const job = 'rerun-none';
  const catalog = defineCatalog([salesJob(job, { start: '2026-04-11T00:00:00Z' })]);
  const taskQueue = uniqueQueue(job);
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      await assert.rejects(
        stack.env.client.workflow.execute('rerun', {
          taskQueue,
          workflowId: `${job}/rerun`,
          args: [
            { job, windowStart: '2026-04-11T00:00:00Z', reason: 'x', requestedBy: 'a', approvers: ['b'] },
          ],
        }),
        (e: unknown) =>
          /has not been processed: nothing to rerun/.test(
            String((e as { cause?: { cause?: Error } }).cause?.cause?.message),
          ),
      );
    },
  );
});

test('Issue 8 item 15: a second open request for a window is refused; two corrections are generations 1 and 2, each applied', async () => {
  const job = 'rerun-twice';
  const W = { start: '2026-04-14T10:00:00Z', end: '2026-04-14T11:00:00Z' };
  const { taskQueue, orders, deps } = await rerunJob(job, W, 10);
  const client = stack.env.client;
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const key = `${job}/${W.start}`;
    const late1 = await insertOrders(stack.t.db, [
      { key: `${job}-late1`, at: '2026-04-14T10:30:00Z', amount: 70 },
    ]);
    const args = (n: number) => ({
      taskQueue,
      workflowId: `${key}/rerun-${n}`,
      args: [
        { job, windowStart: W.start, reason: `correction ${n}`, requestedBy: 'alice', approvers: ['bob'] },
      ],
    });
    // Two requests for the same window at once: one holds the next generation, the other is refused.
    const [a, b] = await Promise.all([
      client.workflow.start('rerun', args(1)),
      client.workflow.start('rerun', args(2)),
    ]);
    const outcomes = await Promise.allSettled([waitForRequest(a.workflowId), waitForRequest(b.workflowId)]);
    const refused = outcomes.findIndex((o) => o.status === 'rejected');
    assert.notEqual(refused, -1, `both requests were accepted: ${JSON.stringify(outcomes)}`);
    const [first, second] = refused === 1 ? [a, b] : [b, a];
    await assert.rejects(
      second.result(),
      (e: unknown) =>
        /a rerun of rerun-twice\/2026-04-14T10:00:00Z is already open/.test(
          String((e as { cause?: { cause?: Error } }).cause?.cause?.message),
        ) || assert.fail(String((e as { cause?: { cause?: Error } }).cause?.cause?.message ?? e)),
    );
    assert.equal((await waitForRequest(first.workflowId)).request!.window.generation, 1);
    await first.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'cli' }] });
    const r1 = (await first.result()) as RerunResult;
    assert.deepEqual([r1.outcome, r1.generation, r1.window?.outcome], ['done', 1, 'processed']);

    // A second correction after the first finished: generation 2, and it applies.
    const late2 = await insertOrders(stack.t.db, [
      { key: `${job}-late2`, at: '2026-04-14T10:40:00Z', amount: 30 },
    ]);
    const third = await client.workflow.start('rerun', args(3));
    assert.equal((await waitForRequest(third.workflowId)).request!.window.generation, 2);
    await third.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'cli' }] });
    const r2 = (await third.result()) as RerunResult;
    assert.deepEqual([r2.outcome, r2.generation, r2.window?.outcome], ['done', 2, 'processed']);
    assert.equal(r2.window?.counts?.input, 12);
    const ref = reference([...orders, ...late1, ...late2], W.start, W.end);
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
    const gens = await stack.t.db
      .selectFrom('job_windows')
      .select(['generation', 'status'])
      .where('job', '=', job)
      .orderBy('generation')
      .execute();
    assert.deepEqual(
      gens.map((g) => [g.generation, g.status]),
      [
        [0, 'done'],
        [1, 'done'],
        [2, 'done'],
      ],
    );
  });
});

test('Issue 8 item 16: a generation with no good orders contributes zero; the next one subtracts only it', async () => {
  const job = 'rerun-empty-gen';
  const W = { start: '2026-04-15T10:00:00Z', end: '2026-04-15T11:00:00Z' };
  const { taskQueue, orders, deps } = await rerunJob(job, W, 6);
  const keys = orders.map((o) => o.key);
  await withWorker(stack.env, taskQueue, deps, async () => {
    assert.equal((await processWindow(taskQueue, job, W)).counts?.applied, 6);
    // Correction 1: every order of the window turns out bad (no amount): nothing good in generation 1.
    await stack.t.db.updateTable('orders').set({ amount: null }).where('order_key', 'in', keys).execute();
    const g1 = await processWindow(taskQueue, job, W, 1);
    assert.deepEqual([g1.counts?.input, g1.counts?.applied], [6, 0]);
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: 0, totalCents: 0 });
    // Correction 2: the amounts come back, halved.
    const fixed = orders.map((o) => ({ ...o, amount: Math.round(o.amount! * 50) / 100 }));
    for (const o of fixed)
      await stack.t.db
        .updateTable('orders')
        .set({ amount: o.amount })
        .where('order_key', '=', o.key)
        .execute();
    const g2 = await processWindow(taskQueue, job, W, 2);
    assert.equal(g2.counts?.applied, 6);
    // An independent computation: the summary holds exactly the newest generation's orders.
    const ref = reference(fixed, W.start, W.end);
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: ref.count, totalCents: ref.totalCents });
  });
});

test('Issue 8 item 17: an approval after the timeout fired is refused and audited as refused', async () => {
  const job = 'rerun-late-approval';
  const W = { start: '2026-04-16T10:00:00Z', end: '2026-04-16T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4);
  const client = stack.env.client;
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const handle = await startRerun(taskQueue, job, W, 'late', { timeoutMs: 3_000 });
    const id = handle.workflowId;
    await waitForRequest(id);
    // Hold the request's row so the workflow stays open just after its timeout fired.
    const release = await holding(stack.t.db, (trx) =>
      trx.selectFrom('rerun_requests').select('status').where('workflow_id', '=', id).forUpdate().execute(),
    );
    try {
      await eventually(
        async () => ((await handle.query<RerunState>('state')).status === 'timed-out' ? true : undefined),
        20_000,
        'the timeout',
      );
      await assert.rejects(
        decideRequest(client, stack.t.db, id, { decision: 'approve', by: 'bob', source: 'cli' }),
        (e: unknown) =>
          (e instanceof DecisionRefused && /timed out/.test(e.message)) || assert.fail(String(e)),
      );
    } finally {
      await release();
    }
    assert.equal(((await handle.result()) as RerunResult).outcome, 'timed-out');
    const audit = await auditOf(id);
    assert.deepEqual(audit, [{ actor: 'bob', accepted: false }]);
  });
});

test('Issue 8 item 17: a decision whose audit cannot be written is not applied, and the user is told so', async () => {
  const job = 'rerun-audit-fails';
  const W = { start: '2026-04-17T10:00:00Z', end: '2026-04-17T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4);
  const client = stack.env.client;
  // The audit refuses an accepted decision by dave (a stand-in for the database failing the write).
  await sql`alter table approval_audit add constraint test_no_dave check (not (accepted and actor = 'dave'))`.execute(
    stack.t.db,
  );
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      await processWindow(taskQueue, job, W);
      const handle = await startRerun(taskQueue, job, W, 'audit', {
        approvers: ['bob', 'dave'],
        timeoutMs: 120_000,
      });
      const id = handle.workflowId;
      await waitForRequest(id);
      await assert.rejects(
        decideRequest(client, stack.t.db, id, { decision: 'approve', by: 'dave', source: 'cli' }),
        (e: unknown) =>
          (e instanceof DecisionRefused && /could not be recorded/.test(e.message)) || assert.fail(String(e)),
      );
      // Refused means not applied: the request still waits, and another approver decides it.
      const state = await handle.query<RerunState>('state');
      assert.deepEqual([state.status, state.decidedBy], ['pending', null]);
      await decideRequest(client, stack.t.db, id, { decision: 'approve', by: 'bob', source: 'cli' });
      const result = (await handle.result()) as RerunResult;
      assert.deepEqual([result.outcome, result.decidedBy], ['done', 'bob']);
      const audit = await auditOf(id);
      assert.deepEqual(audit, [
        { actor: 'dave', accepted: false },
        { actor: 'bob', accepted: true },
      ]);
    });
  } finally {
    await sql`alter table approval_audit drop constraint test_no_dave`.execute(stack.t.db);
  }
});

test('Issue 8 item 18: approver-group membership is not a claim a Temporal client can make', async () => {
  const job = 'rerun-group-claim';
  const W = { start: '2026-04-18T10:00:00Z', end: '2026-04-18T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4);
  await withWorker(
    stack.env,
    taskQueue,
    { ...deps, approvals: { groupProofSecret: 'the-slack-apps-signing-secret' } },
    async () => {
      await processWindow(taskQueue, job, W);
      const handle = await startRerun(taskQueue, job, W, 'claim', { approverGroup: 'S_APPROVERS' });
      const id = handle.workflowId;
      await waitForRequest(id);
      const decide = (d: RerunDecision & { groupProof?: string }) =>
        handle.executeUpdate('decide', { args: [d] });
      // A bare claim of membership, and one with a made-up proof: both refused.
      await assert.rejects(
        decide({ decision: 'approve', by: 'mallory', source: 'cli', viaGroup: 'S_APPROVERS' }),
        (e: unknown) => /mallory may not decide reruns/.test(refusal(e)) || assert.fail(refusal(e)),
      );
      await assert.rejects(
        decide({
          decision: 'approve',
          by: 'mallory',
          source: 'cli',
          viaGroup: 'S_APPROVERS',
          groupProof: 'f'.repeat(64),
        }),
        (e: unknown) =>
          /membership of S_APPROVERS was not vouched for by the Slack app/.test(refusal(e)) ||
          assert.fail(refusal(e)),
      );
      assert.deepEqual((await handle.query<RerunState>('state')).status, 'pending');
      await decide({ decision: 'reject', by: 'bob', source: 'cli' });
      assert.deepEqual(((await handle.result()) as RerunResult).outcome, 'rejected');
      const audit = await auditOf(id);
      assert.deepEqual(audit, [{ actor: 'bob', accepted: true }]);
    },
  );
});

test('Issue 8 item 15: a pending request whose workflow was terminated does not hold the window', async () => {
  const job = 'rerun-terminated';
  const W = { start: '2026-04-19T10:00:00Z', end: '2026-04-19T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 3, { temporal: true });
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const start = (n: number) => startRerun(taskQueue, job, W, n);
    const first = await start(1);
    await waitForRequest(first.workflowId);
    await first.terminate('operator cleanup');
    const second = await start(2);
    assert.equal((await waitForRequest(second.workflowId)).request!.window.generation, 2);
    const rows = await stack.t.db
      .selectFrom('rerun_requests')
      .select(['workflow_id', 'status'])
      .where('job', '=', job)
      .orderBy('generation')
      .execute();
    assert.deepEqual(
      rows.map((r) => r.status),
      ['failed', 'pending'],
    );
    await second.terminate('done with the test');
  });
});
