// Reruns on the real server: approval by Update with a validator; an unauthorised user and the
// requester refused and audited; two approvers at once cause one rerun; the new generation
// replaces the earlier one's effect (no double counting); rejected and timed-out are results.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { memoryLogger } from '../../activities/logger.js';
import { defineCatalog } from '../../schedules/job.js';
import type { RerunDecision, RerunResult, RerunState, WindowRunResult } from '../../workflows/types.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../helpers/temporal.js';

const stack = realStack();

/** The reason an Update was refused: the validator's message. */
function refusal(e: unknown): string {
  if (!(e instanceof WorkflowUpdateFailedError)) return `not an update failure: ${String(e)}`;
  return `${(e.cause as Error | undefined)?.message ?? ''} ${e.message}`;
}
const policy = {
  retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 20_000,
};

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
          return s.request ? s : undefined;
        },
        20_000,
        'the request',
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
