// Hostile review of the rerun preview (issue 12): what an approval applies when the data moves
// after the approval's check, and what the preview lets out of its rolled-back transaction.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import type { ActivityDeps } from '../../activities/index.js';
import { CRASH_POINT } from '../../activities/crash-points.js';
import { decide } from '../../operator/reruns.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import { defineCatalog } from '../../schedules/define.js';
import { depsWithChannels, loopbackChannels } from '../helpers/effects.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { rerunTools } from '../helpers/reruns.js';
import { realStack, withWorker } from '../helpers/temporal.js';

const stack = realStack();
const channels = loopbackChannels();
const { rerunJob, processWindow, startRerun, waitForRequest: previewed } = rerunTools(stack);

const daySummary = async (job: string) =>
  (
    await sql<{
      n: number;
      total: string;
    }>`select order_count::int as n, total::text as total from daily_sales where job = ${job}`.execute(
      stack.t.db,
    )
  ).rows;

test('an order landing between the approval and the approved run: the run does not apply a change nobody previewed', async () => {
  const job = 'hostile-after-approval';
  const W = { start: '2026-07-01T10:00:00Z', end: '2026-07-01T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 5);
  const key1 = `${job}/${W.start}#1`;
  // The late order lands after the approval's check, before the approved run claims the window
  // (with allowed hours, or a busy worker, that gap is hours).
  const hooked: ActivityDeps = {
    ...deps,
    hooks: {
      crashPoint: async (point, key) => {
        if (point === CRASH_POINT.beforeClaim && key === key1)
          await insertOrders(stack.t.db, [{ key: `${job}-unseen`, at: '2026-07-01T10:59:00Z', amount: 500 }]);
      },
    },
  };
  await withWorker(stack.env, taskQueue, hooked, async () => {
    await processWindow(taskQueue, job, W);
    await insertOrders(stack.t.db, [{ key: `${job}-late`, at: '2026-07-01T10:58:00Z', amount: 1 }]);
    const handle = await startRerun(taskQueue, job, W, 1);
    const shown = (await previewed(handle.workflowId)).preview!;
    assert.equal(shown.tables![0]!.rows[0]!.after!.order_count, '6');
    await decide(stack.env.client, stack.t.db, handle.workflowId, {
      decision: 'approve',
      by: 'bob',
      source: 'cli',
      previewDigest: shown.digest,
    });
    const outcome = await handle.result().then(
      () => 'done',
      (e: Error) => e.message,
    );
    const [day] = await daySummary(job);
    assert.notEqual(day!.n, 7, `bob approved 5 -> 6 orders; the run applied 7 (${outcome})`);
    assert.equal(day!.n, 5, 'nothing applied: the change differs from the approved one');
    const failed = (await stack.t.db
      .selectFrom('job_windows')
      .select(['status', 'reason'])
      .where('window_key', '=', key1)
      .executeTakeFirst())!;
    assert.equal(failed.status, 'failed');
    assert.match(failed.reason ?? '', /changed since .*approv/);
  });
});

test("a Slack approval approves the preview its message shows, not one computed for someone else's refused approval", async () => {
  const job = 'hostile-slack-shown';
  const W = { start: '2026-07-02T10:00:00Z', end: '2026-07-02T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 5);
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    await insertOrders(stack.t.db, [{ key: `${job}-late-1`, at: '2026-07-02T10:58:00Z', amount: 1 }]);
    const handle = await startRerun(taskQueue, job, W, 1, { approvers: ['bob', 'carol'] });
    // The Slack message shows this one: 5 -> 6 orders.
    const shown = (await previewed(handle.workflowId)).preview!;
    assert.equal(shown.tables![0]!.rows[0]!.after!.order_count, '6');
    await insertOrders(stack.t.db, [{ key: `${job}-late-2`, at: '2026-07-02T10:59:00Z', amount: 1 }]);
    const approve = (by: string, source: string) =>
      decide(stack.env.client, stack.t.db, handle.workflowId, { decision: 'approve', by, source });
    // carol, at the CLI, is refused and shown 5 -> 7.
    await assert.rejects(approve('carol', 'cli'), /the data changed since the preview/);
    // bob clicks Approve under the message that says 5 -> 6: that is not what would apply.
    await assert.rejects(approve('bob', 'slack'), /the data changed since the preview/);
    // Shown 5 -> 7 by his refusal, bob's next click approves that.
    await approve('bob', 'slack');
    await handle.result();
    const [day] = await daySummary(job);
    assert.equal(day!.n, 7);
  });
});

test('the preview, at the request and at the approval, sends nothing to the provider; the approved run sends once', async () => {
  const job = 'hostile-mail';
  const W = { start: '2026-07-03T10:00:00Z', end: '2026-07-03T11:00:00Z' };
  const subject = `${job} report`;
  const catalog = defineCatalog([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        effects: [
          { name: 'report', channel: 'email', request: { to: ['ops@example.test'], subject, text: ctx.key } },
        ],
      }),
    }),
  ]);
  await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, 3));
  const taskQueue = `${job}-${Date.now()}`;
  const deps = depsWithChannels(stack.t.db, catalog, channels.smtp, channels.chat);
  const sent = () => channels.smtp.messages.filter((m) => m.subject === subject).map((m) => m.text?.trim());
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    assert.deepEqual(sent(), [`${job}/${W.start}`]);
    const handle = await startRerun(taskQueue, job, W, 1);
    const p = (await previewed(handle.workflowId)).preview!;
    assert.deepEqual(p.effects, { repeat: ['report'], added: [], dropped: [] });
    await decide(stack.env.client, stack.t.db, handle.workflowId, {
      decision: 'approve',
      by: 'bob',
      source: 'cli',
    });
    await handle.result();
    // The request's preview and the approval's check ran the handler twice: nothing went out for them.
    assert.deepEqual(sent(), [`${job}/${W.start}`, `${job}/${W.start}#1`]);
    assert.deepEqual(
      (
        await stack.t.db
          .selectFrom('effects')
          .select('effect_key')
          .where('job', '=', job)
          .orderBy('effect_key')
          .execute()
      ).map((e) => e.effect_key),
      [`${job}/${W.start}#1:report`, `${job}/${W.start}:report`].sort(),
    );
  });
});
