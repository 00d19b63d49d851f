// The CLI against the real servers: schedules sync, jobs, pause and resume, a backfill's dry run
// and real run with progress, status and runs, all through `run()` as the installed command does.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { run } from '../../../cli/main.js';
import { loadConfig } from '../../../config/env.js';
import { buildCatalog } from '../../../jobs/catalog.js';
import { defineCatalog } from '../../../schedules/define.js';
import { isoUtc } from '../../../contract/window-key.js';
import { memoryLogger } from '../../../activities/logger.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';

const stack = realStack();

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string; json: () => unknown }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await run(argv, { out: (l) => out.push(l), err: (l) => err.push(l), json: false, tty: false });
  return { code, out: out.join('\n'), err: err.join('\n'), json: () => JSON.parse(out.join('\n')) };
}

test('operate a job from the CLI: sync, pause, resume, backfill (dry run, progress, summary), status, runs', async () => {
  const taskQueue = uniqueQueue('cli');
  Object.assign(process.env, {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TIDEMARK_STATE_DIR: '/tmp/tidemark-cli-test',
    TIDEMARK_APPROVERS: 'bob,carol',
    TIDEMARK_PEOPLE: 'alice=UALICE',
  });
  const sync = await cli(['schedules', 'sync', '--json']);
  assert.equal(sync.code, 0, sync.err);
  assert.ok((sync.json() as { create: string[] }).create.includes('tidemark:sales-hourly'));
  // Keep the other demo jobs quiet during the test.
  for (const job of buildCatalog(loadConfig()).jobs.filter((j) => j.name !== 'sales-hourly'))
    assert.equal((await cli(['pause', job.name, '--reason', 'test'])).code, 0);

  assert.equal((await cli(['pause', 'sales-hourly', '--reason', 'database maintenance'])).code, 0);
  let jobs = (await cli(['jobs', '--json'])).json() as {
    job: string;
    paused: boolean;
    pauseNote: string | null;
    nextFires: string[];
  }[];
  const hourly = () => jobs.find((j) => j.job === 'sales-hourly')!;
  assert.deepEqual([hourly().paused, hourly().pauseNote], [true, 'database maintenance']);
  assert.equal((await cli(['resume', 'sales-hourly'])).code, 0);
  jobs = (await cli(['jobs', '--json'])).json() as typeof jobs;
  assert.equal(hourly().paused, false);
  assert.equal(hourly().nextFires.length, 2);
  assert.match((await cli(['jobs'])).out, /^sales-hourly\s+1h\s+every 1h at \+5m \(UTC\)\s+active/m);

  await insertOrders(
    stack.t.db,
    ordersBetween('cli', '2026-03-01T00:00:00Z', '2026-03-01T06:00:00Z', 60, 10),
  );
  const range = ['--from', '2026-03-01T00:00:00Z', '--to', '2026-03-01T06:00:00Z'];
  const dry = await cli(['backfill', 'sales-hourly', ...range, '--dry-run', '--json']);
  assert.equal(dry.code, 0, dry.err);
  assert.deepEqual(
    (dry.json() as { windows: { action: string }[] }).windows.map((w) => w.action),
    Array(6).fill('process'),
  );

  const config = loadConfig();
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog: buildCatalog(config), logger: memoryLogger(), now: () => new Date() },
    async () => {
      const done = await cli(['backfill', 'sales-hourly', ...range, '--concurrency', '3']);
      assert.equal(done.code, 0, done.err);
      assert.match(
        done.out,
        /^backfill sales-hourly\/backfill-2026-03-01T00:00:00Z-2026-03-01T06:00:00Z: 6 windows, 3 at once$/m,
      );
      assert.match(done.out, /^done: processed 6, already done 0, running elsewhere 0, failed 0$/m);
      // Batched: six hours of the next day, four windows per activity.
      const batched = await cli([
        'backfill',
        'sales-hourly',
        ...['--from', '2026-03-02T00:00:00Z', '--to', '2026-03-02T06:00:00Z'],
        ...['--concurrency', '3', '--batch', '4'],
      ]);
      assert.equal(batched.code, 0, batched.err);
      assert.match(batched.out, /: 6 windows, batches of 4, 3 at once$/m);
      assert.match(batched.out, /^done: processed 6, already done 0, running elsewhere 0, failed 0$/m);
      const batchedRuns = await stack.t.db
        .selectFrom('job_runs')
        .select('workflow_id')
        .where('job', '=', 'sales-hourly')
        .where('kind', '=', 'window')
        .where('outcome', '=', 'processed')
        .where('window_start', '>=', new Date('2026-03-02T00:00:00Z'))
        .where('window_start', '<', new Date('2026-03-02T06:00:00Z'))
        .execute();
      assert.deepEqual(
        batchedRuns.map((r) => r.workflow_id),
        Array(6).fill('sales-hourly/backfill-2026-03-02T00:00:00Z-2026-03-02T06:00:00Z'),
      );

      const askRerun = (by: string) =>
        cli([
          'rerun',
          'sales-hourly',
          '--window',
          '2026-03-01T02:00:00Z',
          '--reason',
          'late orders',
          '--by',
          by,
        ]);
      // Issue 8 item 18: a requester is someone tidemark knows, so their approval elsewhere is recognised.
      const stranger = await askRerun('zed');
      assert.equal(stranger.code, 1, stranger.out);
      assert.match(stranger.err, /rerun: "zed" is not a known person \(bob, carol, alice\)/);
      // A rerun of one window: asked for, refused to someone who is not an approver, approved by one.
      const asked = await askRerun('alice');
      assert.equal(asked.code, 0, asked.err);
      const id = /^rerun requested: (\S+)$/m.exec(asked.out)?.[1];
      assert.ok(id, asked.out);
      assert.match(asked.out, /window sales-hourly\/2026-03-01T02:00:00Z#1 \(generation 1\)/);
      const refused = await cli(['approve', id, '--by', 'mallory']);
      assert.equal(refused.code, 1);
      assert.match(
        refused.err,
        /approve by mallory refused: mallory may not decide reruns \(approvers: bob, carol\)/,
      );
      assert.equal((await cli(['approve', id, '--by', 'bob'])).code, 0);
      await eventually(
        async () =>
          ((await cli(['reruns', '--json'])).json() as { status: string }[])[0]?.status === 'done'
            ? true
            : undefined,
        30_000,
        'the rerun to finish',
      );
      const audit = await stack.t.db
        .selectFrom('approval_audit')
        .select(['actor', 'accepted'])
        .where('request', '=', id)
        .orderBy('id')
        .execute();
      assert.deepEqual(audit, [
        { actor: 'mallory', accepted: false },
        { actor: 'bob', accepted: true },
      ]);
    },
  );
  const again = await cli(['backfill', 'sales-hourly', ...range, '--dry-run']);
  assert.match(again.out, /dry run: 0 to process, 6 already done, 0 not closed yet/);

  // The range's windows only: the schedule synced above fires at five past each hour and may
  // process the latest window while this test runs across it.
  const status = (
    (await cli(['status', 'sales-hourly', '--json'])).json() as {
      start: string;
      status: string;
      input: number;
      applied: number;
      quarantined: number;
    }[]
  ).filter((w) => w.start.startsWith('2026-03-01T0'));
  assert.equal(status.length, 7, "six windows and the rerun's generation");
  assert.ok(status.every((w) => w.status === 'done' && w.applied + w.quarantined === w.input));
  assert.equal(
    status.reduce((s, w) => s + w.input, 0),
    70,
  );
  const runs = (await cli(['runs', 'sales-hourly', '--kind', 'backfill', '--json'])).json() as {
    outcome: string;
  }[];
  assert.deepEqual(
    runs.map((r) => r.outcome),
    ['completed', 'completed'],
    'the backfill and the batched one',
  );
  const missing = await cli(['status', 'nope']);
  assert.equal(missing.code, 2);
});

// Issue 11: a failed workflow shows its cause, and a backfill over open windows says when they close.
test('a failed backfill shows its cause; a backfill over open windows says when they may be processed', async () => {
  const taskQueue = uniqueQueue('cli-cause');
  Object.assign(process.env, {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TIDEMARK_STATE_DIR: '/tmp/tidemark-cli-test',
  });
  const catalog = buildCatalog(loadConfig());
  const deps = (c: typeof catalog) => ({
    db: stack.t.db,
    catalog: c,
    logger: memoryLogger(),
    now: () => new Date(),
  });
  // A worker deployed with an older catalog than the CLI's: the workflow fails in its first activity.
  const older = defineCatalog(catalog.jobs.filter((j) => j.name !== 'sales-hourly'));
  await withWorker(stack.env, taskQueue, deps(older), async () => {
    const failed = await cli([
      'backfill',
      'sales-hourly',
      ...['--from', '2026-04-01T00:00:00Z', '--to', '2026-04-01T02:00:00Z'],
    ]);
    assert.equal(failed.code, 1, failed.err);
    assert.match(
      failed.err,
      /^tidemark backfill: unknown job "sales-hourly"; the catalog has: \S.* \(UnknownJob, in activity planBackfill\)$/,
    );
    assert.doesNotMatch(failed.err, /Workflow execution failed|^\s+at /m);
  });

  // Three hours back to three ahead: the last three windows (four, just after the hour) are open.
  const hour = 3_600_000;
  const top = Math.floor(Date.now() / hour) * hour;
  const at = (ms: number) => isoUtc(new Date(ms));
  const range = ['--from', at(top - 3 * hour), '--to', at(top + 3 * hour)];
  const note =
    /^([34]) of 6 windows are not closed yet and are left out: sales-hourly\/(\S+) may be processed from (\S+) \(its end plus the job's lateness of 5m\), the last, sales-hourly\/(\S+), from (\S+); the job's scheduled ticks process them once they close$/m;
  const dry = await cli(['backfill', 'sales-hourly', ...range, '--dry-run']);
  assert.equal(dry.code, 0, dry.err);
  assert.match(dry.out, note);
  await withWorker(stack.env, taskQueue, deps(catalog), async () => {
    const partly = await cli(['backfill', 'sales-hourly', ...range]);
    assert.equal(partly.code, 0, partly.err);
    const [, open, first, firstFrom, last, lastFrom] = note.exec(partly.out) ?? [];
    assert.ok(open, partly.out);
    assert.match(partly.out, new RegExp(`: ${6 - Number(open)} windows, 8 at once$`, 'm'), 'the closed ones');
    assert.ok([at(top - hour), at(top)].includes(first!), first);
    assert.equal(firstFrom, at(new Date(first!).getTime() + hour + 300_000));
    assert.deepEqual([last, lastFrom], [at(top + 2 * hour), at(top + 3 * hour + 300_000)]);
    const [, processed, alreadyDone] =
      /^done: processed (\d+), already done (\d+), running elsewhere 0, failed 0$/m.exec(partly.out) ?? [];
    // A window may close between the CLI's look and the workflow's: never fewer than it said. Just
    // after the hour's +5m, the first test's sales-hourly schedule (synced, resumed) may have done one.
    assert.ok(Number(processed) + Number(alreadyDone) >= 6 - Number(open), partly.out);
    assert.ok(Number(processed) >= 6 - Number(open) - 1, partly.out);
  });
});

test('a backfill with no worker polling its task queue says so at once; with failed windows it exits 1 and names them', async () => {
  const taskQueue = uniqueQueue('cli-exit');
  Object.assign(process.env, {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TIDEMARK_STATE_DIR: '/tmp/tidemark-cli-test',
  });
  const out: string[] = [];
  const err: string[] = [];
  const backfill = run(
    ['backfill', 'sales-hourly', '--from', '2026-05-01T00:00:00Z', '--to', '2026-05-01T02:00:00Z'],
    {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
      json: false,
      tty: false,
    },
  );
  await eventually(
    async () => (err.some((l) => /no worker polls task queue/.test(l)) ? true : undefined),
    30_000,
    `the note that no worker polls ${taskQueue}: ${err.join('\n')}`,
  );
  assert.match(
    err.join('\n'),
    new RegExp(
      `^tidemark backfill: no worker polls task queue "${taskQueue}" \\(TIDEMARK_TASK_QUEUE\\): the backfill waits until one does; start one with npx tidemark worker`,
      'm',
    ),
  );
  // The worker that comes runs the windows, whose handler fails (one attempt each).
  const failing = defineCatalog([
    salesJob('sales-hourly', {
      retry: { maximumAttempts: 1 },
      handler: async () => {
        throw new Error('the source is unreadable');
      },
    }),
  ]);
  const deps = { db: stack.t.db, catalog: failing, logger: memoryLogger(), now: () => new Date() };
  const code = await withWorker(stack.env, taskQueue, deps, () => backfill);
  assert.equal(code, 1, `${out.join('\n')}\n${err.join('\n')}`);
  assert.match(
    out.join('\n'),
    /^done: processed 0, already done 0, running elsewhere 0, failed 2 \(sales-hourly\/2026-05-01T00:00:00Z, sales-hourly\/2026-05-01T01:00:00Z\)$/m,
  );
});
