// The rerun preview on the real Temporal server: the request computes it once and shows it in
// its state (and in what the CLI prints); approving applies exactly the previewed change; data
// that moved after the preview refuses the approval with the new preview, which a second
// approval then applies; `tidemark rerun --preview` shows it without requesting anything. And at its
// edges: what an approval applies when the data moves after the approval's check, and what the
// preview lets out of its rolled-back transaction (nothing sent to a provider).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { Worker } from '@temporalio/worker';
import { run as runCli } from '../../../cli/main.js';
import { loadConfig } from '../../../config/env.js';
import { buildCatalog } from '../../../jobs/catalog.js';
import { memoryLogger } from '../../../activities/logger.js';
import { decide, DecisionRefused } from '../../../operator/reruns.js';
import type { RerunDecision, RerunPreview, RerunResult } from '../../../contract/workflows.js';
import type { ActivityDeps } from '../../../activities/index.js';
import { CRASH_POINT } from '../../../activities/crash-points.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { defineCatalog } from '../../../schedules/define.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { rerunTools } from '../../helpers/reruns.js';
import { historyFromFile } from '../../helpers/history.js';
import { realStack, sharedBundle, uniqueQueue, windowPolicy, withWorker } from '../../helpers/temporal.js';
import { depsWithChannels, loopbackChannels } from '../../helpers/effects.js';
import { demo, DEMO_SCHEMA, demoTable } from '../../../jobs/demo-schema.js';

const stack = realStack();
const { rerunJob, processWindow, startRerun, auditOf, waitForRequest: previewed } = rerunTools(stack);

/** The job's summary rows as the preview prints them (text, in column order), by day. */
async function summary(job: string): Promise<Map<string, Record<string, string>>> {
  await sql`select set_config('TimeZone', 'UTC', false)`.execute(stack.t.db);
  const r = await sql<{ day: string; row: Record<string, string> }>`
    select day::text as day, (select json_object_agg(key, value) from json_each_text(row_to_json(d))) as row
      from ${demo.daily_sales} d where job = ${job}`.execute(stack.t.db);
  return new Map(r.rows.map((x) => [x.day, x.row]));
}

/** `before` with the preview's rows applied: what the table must hold after the approved run. */
function applied(before: Map<string, Record<string, string>>, p: RerunPreview) {
  const t = p.tables!.find((x) => x.table === demoTable('daily_sales'))!;
  assert.equal(t.rows.length, t.added + t.removed + t.changed, 'every change is listed');
  const want = new Map(before);
  for (const r of t.rows) {
    if (r.after) want.set(r.key.day!, r.after as Record<string, string>);
    else want.delete(r.key.day!);
  }
  return want;
}

test('a late order in a done window: the preview shows the day going from the old count and total to the new; approving applies exactly that', async () => {
  const job = 'preview-late';
  const W = { start: '2026-06-01T10:00:00Z', end: '2026-06-01T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 12);
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    const [old] = (await summary(job)).values();
    await insertOrders(stack.t.db, [{ key: `${job}-late`, at: '2026-06-01T10:58:00Z', amount: 99.95 }]);
    const before = await summary(job);
    const handle = await startRerun(taskQueue, job, W, 1);
    const state = await previewed(handle.workflowId);
    const p = state.preview!;
    assert.equal(p.outcome, 'ok');
    const row = p.tables![0]!.rows[0]!;
    assert.deepEqual(
      [row.change, row.before!.order_count, row.before!.total, row.after!.order_count, row.after!.total],
      ['changed', '12', old!.total, '13', (Number(old!.total) + 99.95).toFixed(2)],
    );
    assert.deepEqual(await summary(job), before, 'the preview changed nothing');
    assert.equal(
      (await stack.t.db.selectFrom('job_windows').select('generation').where('job', '=', job).execute())
        .length,
      1,
      'no marker of generation 1 before the approval',
    );

    await handle.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'cli' }] });
    const result = (await handle.result()) as RerunResult;
    assert.equal(result.outcome, 'done');
    assert.deepEqual(await summary(job), applied(before, p), 'the approved run applied exactly the preview');
  });
});

test('data that moved after the preview: the approval is refused with the new preview; approving that one applies it', async () => {
  const job = 'preview-stale';
  const W = { start: '2026-06-02T10:00:00Z', end: '2026-06-02T11:00:00Z' };
  const { taskQueue, deps } = await rerunJob(job, W, 8);
  await withWorker(stack.env, taskQueue, deps, async () => {
    await processWindow(taskQueue, job, W);
    await insertOrders(stack.t.db, [{ key: `${job}-late-1`, at: '2026-06-02T10:50:00Z', amount: 10 }]);
    const handle = await startRerun(taskQueue, job, W, 1);
    const shown = (await previewed(handle.workflowId)).preview!;
    assert.equal(shown.tables![0]!.rows[0]!.after!.order_count, '9');
    // Another late order lands while the request waits.
    await insertOrders(stack.t.db, [{ key: `${job}-late-2`, at: '2026-06-02T10:55:00Z', amount: 5 }]);
    const approve = (extra: Partial<RerunDecision> = {}) =>
      decide(stack.env.client, stack.t.db, handle.workflowId, {
        decision: 'approve',
        by: 'bob',
        source: 'cli',
        ...extra,
      });
    await assert.rejects(
      approve(),
      (e: unknown) =>
        (e instanceof DecisionRefused &&
          /the data changed since the preview shown with the request; nothing was decided\. Now: .*order_count 8 -> 10/.test(
            e.message,
          )) ||
        assert.fail(String(e)),
    );
    const now = (await previewed(handle.workflowId)).preview!;
    assert.notEqual(now.digest, shown.digest);
    assert.equal(now.tables![0]!.rows[0]!.after!.order_count, '10');
    // bob approving what he saw before is refused too: his approval names that preview.
    await assert.rejects(
      approve({ previewDigest: shown.digest }),
      /the data changed since the preview you approved/,
    );
    const before = await summary(job);
    await approve({ previewDigest: now.digest });
    assert.equal(((await handle.result()) as RerunResult).outcome, 'done');
    assert.deepEqual(await summary(job), applied(before, now));
    assert.deepEqual(
      (await auditOf(handle.workflowId)).map((a) => a.accepted),
      [false, false, true],
      'both refusals audited',
    );
  });
});

test('tidemark rerun --preview prints the change without requesting it; the request prints it too', async () => {
  // The CLI knows the jobs of the real catalog.
  const job = 'sales-hourly';
  const W = { start: '2026-06-03T10:00:00Z', end: '2026-06-03T11:00:00Z' };
  const taskQueue = uniqueQueue('preview-cli');
  const env = {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TIDEMARK_STATE_DIR: '/tmp/tidemark-preview-test',
    TIDEMARK_APPROVERS: 'bob=UBOB',
    TIDEMARK_PEOPLE: 'alice=UALICE',
  };
  Object.assign(process.env, env);
  const catalog = buildCatalog(loadConfig(env));
  await insertOrders(stack.t.db, ordersBetween('preview-cli', W.start, W.end, 4));
  const deps = { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() };
  const cli = async (...argv: string[]) => {
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(argv, {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
      json: false,
      tty: false,
    });
    assert.equal(code, 0, err.join('\n'));
    return out.join('\n');
  };
  await withWorker(stack.env, taskQueue, deps, async () => {
    const key = `${job}/${W.start}`;
    await stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId: key,
      args: [{ job, ...W, generation: 0, key, trigger: 'manual', policy: windowPolicy(1, 20_000) }],
    });
    assert.match(
      await cli('rerun', job, W.start, '--preview'),
      /generation 1 \(replaces generation 0\), computed \S+: no change$/,
    );
    await insertOrders(stack.t.db, [{ key: 'preview-cli-late', at: '2026-06-03T10:59:59Z', amount: 1000 }]);
    assert.match(
      await cli('rerun', job, '--window', W.start, '--preview'),
      /daily_sales: 1 changed\n  ~ job=sales-hourly day=2026-06-03: order_count 4 -> 5, total \S+ -> \S+\nwould send no external effect/,
    );
    assert.equal(
      (await stack.t.db.selectFrom('rerun_requests').select('workflow_id').where('job', '=', job).execute())
        .length,
      0,
      'a preview requests nothing',
    );
    const asked = await cli('rerun', job, '--window', W.start, '--reason', 'late order', '--by', 'alice');
    assert.match(
      asked,
      new RegExp(
        `rerun requested: .*\\n.*\\npreview of generation 1 .*\\n${DEMO_SCHEMA}\\.daily_sales: 1 changed\\n  ~ .*order_count 4 -> 5`,
      ),
    );
  });
});

test("reruns recorded before the preview, and with a preview and a refused approval, replay on today's code", async () => {
  // 591544c: approved and run before previews existed (the issue 8 markers, none of issue 12).
  // 66b3b76: the preview computed with the request, an approval refused because the data moved,
  // the next approved with the new preview, generation 1 run.
  for (const name of ['rerun-approved-591544c', 'rerun-preview-refused-approved-66b3b76']) {
    const history = await historyFromFile(new URL(`../../fixtures/${name}.history.json`, import.meta.url));
    await Worker.runReplayHistory({ workflowBundle: await sharedBundle() }, history);
  }
});

// What an approval applies when the data moves after the approval's check, and what the preview lets
// out of its rolled-back transaction. On a Temporal namespace and database of their own.
describe('an approval against data that moves after its check, and a preview that sends nothing', () => {
  const stack = realStack();
  const channels = loopbackChannels();
  const { rerunJob, processWindow, startRerun, waitForRequest: previewed } = rerunTools(stack);

  const daySummary = async (job: string) =>
    (
      await sql<{
        n: number;
        total: string;
      }>`select order_count::int as n, total::text as total from ${demo.daily_sales} where job = ${job}`.execute(
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
            await insertOrders(stack.t.db, [
              { key: `${job}-unseen`, at: '2026-07-01T10:59:00Z', amount: 500 },
            ]);
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
            {
              name: 'report',
              channel: 'email',
              request: { to: ['ops@example.test'], subject, text: ctx.key },
            },
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
});
