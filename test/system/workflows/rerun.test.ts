// Reruns on the real server: approval by Update with a validator; an unauthorised user and the
// requester refused and audited; two approvers at once cause one rerun; the new generation
// replaces the earlier one's effect (no double counting); rejected and timed-out are results. And at
// their edges, through the page over real HTTP: a request the workers refuse, requests whose workflow
// ended, decisions before a request is recorded or after it closed, an older history replayed.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowUpdateFailedError, WorkflowNotFoundError } from '@temporalio/client';
import { sql } from 'kysely';
import { Worker } from '@temporalio/worker';
import pg from 'pg';
import { memoryLogger } from '../../../activities/logger.js';
import {
  decide as decideRequest,
  DecisionRefused,
  NotAWindowStart,
  requestRerun,
} from '../../../operator/reruns.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { RerunDecision, RerunResult, RerunState, WindowRunResult } from '../../../contract/workflows.js';
import { rerunActivities } from '../../../activities/rerun.js';
import { decisionProof, requestProof } from '../../../activities/decision-proof.js';
import { loadConfig } from '../../../config/env.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../../helpers/jobs.js';
import { holding, policy, rerunTools, whyStalled } from '../../helpers/reruns.js';
import { eventually, realStack, uniqueQueue, withWorker, sharedBundle } from '../../helpers/temporal.js';
import { historyFromFile } from '../../helpers/history.js';
import { startWeb } from '../../helpers/web.js';
import { SCHEMA, tm } from '../../helpers/db.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

const stack = realStack();
const { rerunJob, processWindow, startRerun, waitForRequest, auditOf } = rerunTools(stack);

/** The reason an Update was refused: the validator's message. */
function refusal(e: unknown): string {
  if (!(e instanceof WorkflowUpdateFailedError)) return `not an update failure: ${String(e)}`;
  return `${(e.cause as Error | undefined)?.message ?? ''} ${e.message}`;
}

const CAROL = {
  subject: 'idp|carol-0001',
  displayName: 'Carol Approver',
  roles: ['viewer', 'approver'],
  credential: 'session:0a1b2c3d4e5f',
};
const ALICE = { ...CAROL, subject: 'idp|alice-0002', displayName: 'Alice Operator' };
const DAY = 86_400_000;

/** A rerun request as the page asks it for a signed-in person: signed with `key`. */
function startSigned(
  taskQueue: string,
  job: string,
  W: { start: string; end: string },
  n: number | string,
  key: string,
  requestedBy: string,
  requester: typeof CAROL,
) {
  const request = `${job}/${W.start}/rerun-${n}`;
  const claim = {
    request,
    job,
    windowStart: W.start,
    reason: 'x',
    requestedBy,
    timeoutMs: DAY,
    actor: requester,
  };
  return startRerun(taskQueue, job, W, n, {
    requestedBy,
    requester,
    timeoutMs: DAY,
    requestProof: requestProof(key, claim),
  });
}

/** The innermost message of a failure (a workflow's, wrapping its activity's). */
function innermost(e: unknown): string {
  let x = e as Error;
  while (x.cause instanceof Error) x = x.cause;
  return x.message;
}

/** What a raw Temporal client reads in a history: the arguments of each accepted decision. */
async function decisionsInHistory(id: string, runId?: string): Promise<RerunDecision[]> {
  const h = await stack.env.client.workflow.getHandle(id, runId).fetchHistory();
  return (h.events ?? []).flatMap((e) =>
    (e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.args?.payloads ?? []).map(
      (p) => JSON.parse(Buffer.from(p.data!).toString('utf8')) as RerunDecision,
    ),
  );
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
        // Second, or while the first was being checked under the workers' rule.
        /already approved by (bob|carol)|a decision by (bob|carol) is being checked/,
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

test('a second open request for a window is refused; two corrections are generations 1 and 2, each applied', async () => {
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

test('a generation with no good orders contributes zero; the next one subtracts only it', async () => {
  const job = 'rerun-empty-gen';
  const W = { start: '2026-04-15T10:00:00Z', end: '2026-04-15T11:00:00Z' };
  const { taskQueue, orders, deps } = await rerunJob(job, W, 6);
  const keys = orders.map((o) => o.key);
  await withWorker(stack.env, taskQueue, deps, async () => {
    assert.equal((await processWindow(taskQueue, job, W)).counts?.applied, 6);
    // Correction 1: every order of the window turns out bad (no amount): nothing good in generation 1.
    await stack.t.db
      .withSchema(DEMO_SCHEMA)
      .updateTable('orders')
      .set({ amount: null })
      .where('order_key', 'in', keys)
      .execute();
    const g1 = await processWindow(taskQueue, job, W, 1);
    assert.deepEqual([g1.counts?.input, g1.counts?.applied], [6, 0]);
    assert.deepEqual(await summaryOf(stack.t.db, job), { count: 0, totalCents: 0 });
    // Correction 2: the amounts come back, halved.
    const fixed = orders.map((o) => ({ ...o, amount: Math.round(o.amount! * 50) / 100 }));
    for (const o of fixed)
      await stack.t.db
        .withSchema(DEMO_SCHEMA)
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

test('an approval after the timeout fired is refused and audited as refused', async () => {
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

test('a decision whose audit cannot be written is not applied, and the user is told so', async () => {
  const job = 'rerun-audit-fails';
  const W = { start: '2026-04-17T10:00:00Z', end: '2026-04-17T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4);
  const client = stack.env.client;
  // The audit refuses an accepted decision by dave (a stand-in for the database failing the write).
  await sql`alter table ${tm.approval_audit} add constraint test_no_dave check (not (accepted and actor = 'dave'))`.execute(
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
    await sql`alter table ${tm.approval_audit} drop constraint test_no_dave`.execute(stack.t.db);
  }
});

test('approver-group membership is not a claim a Temporal client can make', async () => {
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

test("the approval rule is the workers' own: a request naming itself its approver, or allowing self-approval, approves nothing", async () => {
  const job = 'rerun-worker-policy';
  const W = { start: '2026-04-19T10:00:00Z', end: '2026-04-19T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4);
  const workers = { ...deps, approvals: { policy: { approvers: ['bob'], allowSelfApproval: false } } };
  await withWorker(stack.env, taskQueue, workers, async () => {
    await processWindow(taskQueue, job, W);
    // A client with raw access to Temporal: it asks, names itself sole approver and allows self-approval.
    const forged = await startRerun(taskQueue, job, W, 'forged', {
      requestedBy: 'mallory',
      approvers: ['mallory'],
      allowSelfApproval: true,
    });
    await waitForRequest(forged.workflowId);
    await assert.rejects(
      forged.executeUpdate('decide', { args: [{ decision: 'approve', by: 'mallory', source: 'cli' }] }),
      (e: unknown) =>
        /mallory asked for this rerun and may not approve it/.test(refusal(e)) || assert.fail(refusal(e)),
    );
    await assert.rejects(
      forged.executeUpdate('decide', { args: [{ decision: 'approve', by: 'eve', source: 'cli' }] }),
      (e: unknown) =>
        /eve may not decide reruns \(approvers: bob\)/.test(refusal(e)) || assert.fail(refusal(e)),
    );
    assert.equal((await forged.query<RerunState>('state')).status, 'pending');
    await forged.executeUpdate('decide', { args: [{ decision: 'reject', by: 'bob', source: 'cli' }] });
    assert.equal(((await forged.result()) as RerunResult).outcome, 'rejected');

    // A request made before any approver was configured: the workers' list, as it is now, decides.
    const early = await startRerun(taskQueue, job, W, 'early', { approvers: [] });
    await waitForRequest(early.workflowId);
    await early.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'cli' }] });
    assert.equal(((await early.result()) as RerunResult).outcome, 'done');
  });
});

test('with the decision key, a worker takes only decisions the page or the Slack app signed, and audits who', async () => {
  const job = 'rerun-signed-decisions';
  const W = { start: '2026-04-20T10:00:00Z', end: '2026-04-20T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 4);
  const key = 'k'.repeat(40);
  const workers = {
    ...deps,
    approvals: {
      policy: { approvers: ['bob'], allowSelfApproval: false, requireProof: true },
      decisionKey: key,
    },
  };
  await withWorker(stack.env, taskQueue, workers, async () => {
    await processWindow(taskQueue, job, W);
    const handle = await startSigned(taskQueue, job, W, 'signed', key, 'alice', ALICE);
    const id = handle.workflowId;
    await waitForRequest(id);
    const carol = CAROL;
    const claim = {
      request: id,
      run: handle.firstExecutionRunId,
      decision: 'approve' as const,
      by: 'carol',
      source: 'web',
      actor: carol,
    };
    const decide = (d: RerunDecision) => handle.executeUpdate('decide', { args: [d] });
    const unsigned = /carries no valid signature of the page or the Slack app/;
    // A client with raw access to Temporal: a bare name (even an approver's), a made-up proof, one
    // made with another key, and a true one for another decision are all refused.
    for (const forged of [
      { decision: 'approve' as const, by: 'bob', source: 'cli' },
      { ...claim, proof: 'f'.repeat(64) },
      { ...claim, proof: decisionProof('another key of forty characters or more!', claim) },
      { ...claim, proof: decisionProof(key, { ...claim, decision: 'reject' }) },
      {
        ...claim,
        actor: { ...carol, roles: ['viewer', 'approver', 'admin'] },
        proof: decisionProof(key, claim),
      },
    ])
      await assert.rejects(
        decide(forged),
        (e: unknown) => unsigned.test(refusal(e)) || assert.fail(refusal(e)),
      );
    // Signed, but the requester approving their own request: refused whatever their roles.
    const own = { ...claim, by: 'alice', actor: ALICE };
    await assert.rejects(
      decide({ ...own, proof: decisionProof(key, own) }),
      (e: unknown) =>
        /alice asked for this rerun and may not approve it/.test(refusal(e)) || assert.fail(refusal(e)),
    );
    assert.equal((await handle.query<RerunState>('state')).status, 'pending');
    // Carol is no name in TIDEMARK_APPROVERS: the approver role, signed by the page, lets her decide.
    await decide({ ...claim, proof: decisionProof(key, claim) });
    assert.equal(((await handle.result()) as RerunResult).outcome, 'done');
    const rows = await stack.t.db
      .selectFrom('approval_audit')
      .select(['actor', 'accepted', 'source', 'subject', 'display_name', 'credential'])
      .where('request', '=', id)
      .where('accepted', '=', true)
      .execute();
    assert.deepEqual(rows, [
      {
        actor: 'carol',
        accepted: true,
        source: 'web',
        subject: 'idp|carol-0001',
        display_name: 'Carol Approver',
        credential: 'session:0a1b2c3d4e5f',
      },
    ]);
  });
});

test('a signature counts for what it signed: not without its preview, not in a new run of the request id, not for a request a client wrote', async () => {
  const job = 'rerun-signed-replay';
  const W = { start: '2026-04-21T10:00:00Z', end: '2026-04-21T11:00:00Z' };
  const W2 = { start: '2026-04-21T11:00:00Z', end: '2026-04-21T12:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 6);
  await insertOrders(stack.t.db, [{ key: `${job}-w2`, at: '2026-04-21T11:10:00Z', amount: 7 }]);
  const key = 'r'.repeat(40);
  const workers = {
    ...deps,
    approvals: {
      policy: { approvers: ['bob'], allowSelfApproval: false, requireProof: true },
      decisionKey: key,
    },
  };
  const unsigned = /carries no valid signature of the page or the Slack app/;
  await withWorker(stack.env, taskQueue, workers, async () => {
    await processWindow(taskQueue, job, W);
    await processWindow(taskQueue, job, W2);
    // A request a Temporal client writes (naming anyone it likes as requester) is not recorded.
    const raw = await startRerun(taskQueue, job, W, 'raw', { requestedBy: 'bob' });
    await assert.rejects(
      raw.result(),
      (e: unknown) =>
        /carries no valid signature of the page: ask on the page signed in/.test(innermost(e)) ||
        assert.fail(innermost(e)),
    );

    const handle = await startSigned(taskQueue, job, W, 1, key, 'alice', ALICE);
    const id = handle.workflowId;
    const shown = (await waitForRequest(id)).preview!;
    const claim = {
      request: id,
      run: handle.firstExecutionRunId,
      decision: 'approve' as const,
      by: 'carol',
      source: 'web',
      actor: CAROL,
      previewDigest: shown.digest,
    };
    // The data moves before Carol's approval lands: refused, the new preview shown.
    await insertOrders(stack.t.db, [{ key: `${job}-late`, at: '2026-04-21T10:50:00Z', amount: 5000 }]);
    await assert.rejects(
      handle.executeUpdate('decide', { args: [{ ...claim, proof: decisionProof(key, claim) }] }),
      (e: unknown) =>
        /the data changed since the preview you approved/.test(refusal(e)) || assert.fail(refusal(e)),
    );
    // Read from the history and sent again without its preview, or with a note of another: refused.
    const [seen] = await decisionsInHistory(id);
    assert.ok(seen?.proof);
    const withoutPreview = { ...seen! };
    delete withoutPreview.previewDigest;
    for (const replayed of [withoutPreview, { ...seen!, note: 'carol said yes' }])
      await assert.rejects(
        handle.executeUpdate('decide', { args: [replayed] }),
        (e: unknown) => unsigned.test(refusal(e)) || assert.fail(refusal(e)),
      );
    // Sent again as it was: one signature, one try (the preview it was refused for is now shown).
    await assert.rejects(
      handle.executeUpdate('decide', { args: [seen!] }),
      (e: unknown) => /was sent before: a signature counts once/.test(refusal(e)) || assert.fail(refusal(e)),
    );
    assert.equal((await handle.query<RerunState>('state')).status, 'pending');
    // Carol rejects; the request is closed. The id started again (its window or another) is refused,
    // and her signed decision read from the first run's history opens nothing in a new run.
    const reject = { ...claim, decision: 'reject' as const, previewDigest: undefined };
    delete (reject as { previewDigest?: string }).previewDigest;
    await handle.executeUpdate('decide', { args: [{ ...reject, proof: decisionProof(key, reject) }] });
    assert.equal(((await handle.result()) as RerunResult).outcome, 'rejected');
    for (const window of [W, W2]) {
      const again = await stack.env.client.workflow.start('rerun', {
        taskQueue,
        workflowId: id,
        args: [
          {
            job,
            windowStart: window.start,
            reason: 'x',
            requestedBy: 'alice',
            approvers: [],
            requester: ALICE,
            timeoutMs: DAY,
            requestProof: requestProof(key, {
              timeoutMs: DAY,
              request: id,
              job,
              windowStart: window.start,
              reason: 'x',
              requestedBy: 'alice',
              actor: ALICE,
            }),
          },
        ],
      });
      await assert.rejects(
        again.result(),
        (e: unknown) => /was used by an earlier request/.test(innermost(e)) || assert.fail(innermost(e)),
      );
    }
    // An open request ended by a client and started again under its id, with its signed input as it
    // was or with a timeout of the client's: refused either way.
    const open = await startSigned(taskQueue, job, W2, 2, key, 'alice', ALICE);
    await waitForRequest(open.workflowId);
    const described = await stack.env.client.workflow.getHandle(open.workflowId).describe();
    const firstInput = (await stack.env.client.workflow.getHandle(open.workflowId).fetchHistory()).events![0]!
      .workflowExecutionStartedEventAttributes!.input!.payloads![0]!;
    const input = JSON.parse(Buffer.from(firstInput.data!).toString('utf8')) as Record<string, unknown>;
    await open.terminate('a client with raw access');
    assert.equal(described.status.name, 'RUNNING');
    for (const [args, why] of [
      [input, /was used by an earlier request/],
      [{ ...input, timeoutMs: 400 * DAY }, /carries no valid signature of the page/],
    ] as const) {
      const again = await stack.env.client.workflow.start('rerun', {
        taskQueue,
        workflowId: open.workflowId,
        args: [args],
      });
      await assert.rejects(
        again.result(),
        (e: unknown) => why.test(innermost(e)) || assert.fail(innermost(e)),
      );
    }
    const generations = await stack.t.db
      .selectFrom('job_windows')
      .select(['window_start', 'generation'])
      .where('job', '=', job)
      .where('generation', '>', 0)
      .execute();
    assert.deepEqual(generations, [], 'no rerun ran');
  });
});

test('a pending request whose workflow was terminated does not hold the window', async () => {
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

// Reruns and approvals at their edges, on the real server over real HTTP: a rerun the page asks for
// but the workers refuse, requests whose workflow ended, decisions before a request is recorded or
// after it closed, a history recorded before audit-first decisions. On a Temporal namespace and
// database of their own.
describe("reruns at their edges: refused from the page, workflows that ended, decisions out of a request's life", () => {
  const stack = realStack();
  const { rerunJob, processWindow, startRerun, waitForRequest, auditOf } = rerunTools(stack);
  const TOKEN = 'review-operator-token-1';
  const bearer = { authorization: `Bearer ${TOKEN}` };
  test('a rerun the page asks for but the worker refuses is an error on the page, not "ok"', async () => {
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

  test('an approved request whose workflow ended does not hold its window for ever', async () => {
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
      // The row the job's first tick makes (this test runs its window directly, with no tick).
      await hold.query(`insert into ${SCHEMA}.job_watermarks (job, watermark) values ($1, $2)`, [job, W.end]);
      await hold.query('begin');
      const held = await hold.query(`select 1 from ${SCHEMA}.job_watermarks where job = $1 for update`, [
        job,
      ]);
      assert.equal(held.rowCount, 1, "the job's watermark row is held");
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
        60_000,
        'approved',
      ).catch(async (err: Error) => {
        throw new Error(`${err.message}: ${await whyStalled(client, first.workflowId, stack.t.db)}`);
      });
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

  test('one request recorded by two overlapping attempts is one request, not refused by itself', async () => {
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

  test('a decision before the request is recorded is refused, so a refused request has no accepted approval', async () => {
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

  test('a decision on a request that has already timed out (its workflow closed) is refused and audited', async () => {
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

  test("a rerun approved and run before audit-first decisions (recorded on 61971a3) replays on today's code", async () => {
    // Recorded on 61971a3 (before items 17 and 18): approved by bob, generation 1 run, done. A worker
    // deployed while such a request is still running must replay it, not fail it for nondeterminism.
    const history = await historyFromFile(
      new URL('../../fixtures/rerun-approved-61971a3.history.json', import.meta.url),
    );
    await Worker.runReplayHistory({ workflowBundle: await sharedBundle() }, history);
  });
});
