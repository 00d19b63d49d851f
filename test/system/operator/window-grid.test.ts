// The page's window grid and window detail against real Temporal and PostgreSQL: every state a
// window can be in (done, failed, running, waiting for allowed hours, not closed, missing, a rerun
// marked), an effect's attempts and provider reply, the rerun history, labels in the job's zone and
// UTC across DST changes, and the routes' 400/404 answers.
import { webDeps } from '../../../web/deps.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { sql } from 'kysely';
import { memoryLogger } from '../../../activities/logger.js';
import { loadConfig } from '../../../config/env.js';
import { windowDetail } from '../../../operator/window-detail.js';
import { windowGrid, type WindowGrid } from '../../../operator/window-grid.js';
import { ledgerRows } from '../../../operator/window-ledger.js';
import { type WindowHandler } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import { HttpError } from '../../../web/errors.js';
import { windowsRoutes } from '../../../web/routes/windows.js';
import {
  depsWithChannels,
  effectRunPolicy,
  loopbackChannels,
  summaryWithMail,
} from '../../helpers/effects.js';
import { gatedHandler, insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { approvedRerun } from '../../helpers/reruns.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  windowByHand,
  windowPolicy,
  withWorker,
} from '../../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';
import { tm } from '../../helpers/db.js';

const stack = realStack();
const channels = loopbackChannels();

const cells = (g: WindowGrid) => g.rows.flatMap((r) => r.cells);
/** Window start (UTC ISO) -> state and generation, for a grid of window cells. */
const states = (g: WindowGrid) =>
  Object.fromEntries(
    cells(g).map((c) => [
      c.start,
      `${c.state}${'generation' in c && c.generation ? ` #${c.generation}` : ''}`,
    ]),
  );

test('the grid shows each window state: done, failed, running, a rerun, missing, not closed, waiting for allowed hours', async () => {
  const job = 'grid-mix';
  const T = (h: number) => `2026-06-10T${String(h).padStart(2, '0')}:00:00Z`;
  const gate = gatedHandler();
  const handler: WindowHandler = async (ctx) => {
    if (ctx.window.start.toISOString() === '2026-06-10T01:00:00.000Z')
      throw new Error('source table unreachable (test)');
    return await gate.handler(ctx);
  };
  // A second job that may run only in two hours from now (UTC): its window run sleeps until then.
  const h = new Date().getUTCHours();
  const hh = (n: number) => `${String(n % 24).padStart(2, '0')}:00`;
  const hours = { from: hh(h + 2), to: hh(h + 3) };
  const nightly = 'grid-nightly';
  const catalog = defineCatalog([
    salesJob(job, { start: T(0), lateness: '0m', handler }),
    salesJob(nightly, { start: T(0), lateness: '0m', allowedHours: hours }),
  ]);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, T(0), T(4), 40));
  const client = stack.env.client;
  const deps = { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() };
  await withWorker(stack.env, taskQueue, deps, async () => {
    await windowByHand(client, taskQueue, job, T(0), T(1));
    await assert.rejects(windowByHand(client, taskQueue, job, T(1), T(2)), /window|failed/i);
    // 02:00 done, then rerun through a request approved by another person: generation 1.
    await windowByHand(client, taskQueue, job, T(2), T(3));
    await approvedRerun(client, taskQueue, job, T(2));
    // 03:00 held open in its handler: running.
    gate.hold(`${job}/${T(3)}`);
    const held = client.workflow.start('window', {
      taskQueue,
      workflowId: `${job}/${T(3)}`,
      args: [
        {
          job,
          start: T(3),
          end: T(4),
          generation: 0,
          key: `${job}/${T(3)}`,
          trigger: 'manual',
          policy: windowPolicy(1, 60_000),
        },
      ],
    });
    await eventually(async () => (gate.entered(`${job}/${T(3)}`) ? true : undefined));
    // The nightly job's window, started outside its allowed hours: it waits for them.
    const sleeping = await client.workflow.start('window', {
      taskQueue,
      workflowId: `${nightly}/${T(0)}`,
      args: [
        {
          job: nightly,
          start: T(0),
          end: T(1),
          generation: 0,
          key: `${nightly}/${T(0)}`,
          trigger: 'manual',
          policy: { ...windowPolicy(1, 60_000), allowedHours: { ...hours, timezone: 'UTC' } },
        },
      ],
    });
    try {
      const now = new Date('2026-06-10T05:30:00Z');
      const grid = await eventually(
        async () => {
          const g = await windowGrid({
            db: stack.t.db,
            client,
            job: catalog.get(job),
            now,
            from: T(0),
            to: T(7),
          });
          return states(g)[T(3)] === 'running' ? g : undefined;
        },
        20_000,
        'the held window to show running',
      );
      assert.deepEqual(states(grid), {
        [T(0)]: 'done',
        [T(1)]: 'failed',
        [T(2)]: 'done #1',
        [T(3)]: 'running',
        [T(4)]: 'missing',
        [T(5)]: 'not-closed',
        [T(6)]: 'not-closed',
      });
      assert.deepEqual(grid.totals, {
        done: 2,
        failed: 1,
        running: 1,
        waiting: 0,
        'not-closed': 2,
        missing: 1,
        unscheduled: 0,
        reruns: 1,
      });
      assert.deepEqual(grid.layout, { rows: 'day', columns: 'hour', cell: 'window' });
      const [done, failed] = cells(grid) as Extract<ReturnType<typeof cells>[number], { kind: 'window' }>[];
      assert.deepEqual(done!.records, { in: 10, applied: 10, quarantined: 0 });
      assert.equal(done!.attempts, 1);
      assert.ok(done!.durationMs !== null && done!.durationMs >= 0);
      assert.match(failed!.reason ?? '', /source table unreachable/);
      assert.equal(done!.key, `${job}/${T(0)}`);
      assert.equal(done!.local, '2026-06-10 00:00 – 01:00 UTC (UTC+00:00)');

      // Outside its allowed hours, a running window waits for them.
      const waiting = await eventually(
        async () => {
          const g = await windowGrid({
            db: stack.t.db,
            client,
            job: catalog.get(nightly),
            now: new Date(),
            from: T(0),
            to: T(2),
          });
          return states(g)[T(0)] === 'waiting' ? g : undefined;
        },
        20_000,
        'the nightly window to show waiting',
      );
      assert.deepEqual(states(waiting), { [T(0)]: 'waiting', [T(1)]: 'missing' });

      // The rerun history in the window's detail.
      const detail = await windowDetail({
        db: stack.t.db,
        client,
        config: { TIDEMARK_WEB_UI_URL: 'http://ui.test:8233', TEMPORAL_NAMESPACE: 'default' },
        job: catalog.get(job),
        key: `${job}/${T(2)}`,
        now,
      });
      assert.deepEqual(
        detail.ledger.map((l) => [l.generation, l.status, l.trigger]),
        [
          [0, 'done', 'manual'],
          [1, 'done', 'rerun'],
        ],
      );
      assert.deepEqual(
        detail.reruns.map((r) => [r.request, r.generation, r.status, r.requestedBy, r.decidedBy]),
        [[`${job}/${T(2)}/rerun-1`, 1, 'done', 'alice', 'bob']],
      );
      assert.deepEqual(
        detail.reruns[0]!.decisions.map((d) => [d.actor, d.decision, d.accepted, d.source]),
        [['bob', 'approve', true, 'web']],
      );
      assert.equal(
        detail.temporal,
        `http://ui.test:8233/namespaces/default/workflows/${encodeURIComponent(`${job}/${T(2)}#1`)}`,
      );
      assert.ok(detail.runs.some((r) => r.generation === 1 && r.outcome === 'processed'));
      assert.equal(detail.rerunnable, true);
      // The failed window's incident is about it.
      const failedDetail = await windowDetail({
        db: stack.t.db,
        client,
        config: { TIDEMARK_WEB_UI_URL: 'http://ui.test:8233', TEMPORAL_NAMESPACE: 'default' },
        job: catalog.get(job),
        key: T(1),
        now,
      });
      assert.equal(failedDetail.state, 'failed');
      assert.deepEqual(
        failedDetail.incidents.map((i) => [i.subject, i.kind, i.open]),
        [[`${job}/${T(1)}`, 'window-failed', true]],
      );
      assert.equal(failedDetail.rerunnable, false);
    } finally {
      gate.release(`${job}/${T(3)}`);
      await (await held).result();
      await sleeping.terminate('test over');
    }
  });
});

test('a window that started in its allowed hours and still works after they closed shows running, not waiting', async () => {
  const job = 'grid-overrun';
  const T0 = '2026-06-11T00:00:00Z';
  const T1 = '2026-06-11T01:00:00Z';
  const gate = gatedHandler();
  // Allowed now (the run starts at once), and the grid asked at a time outside the hours.
  const h = new Date().getUTCHours();
  const hh = (n: number) => `${String(n % 24).padStart(2, '0')}:00`;
  const hours = { from: hh(h + 23), to: hh(h + 2) };
  const catalog = defineCatalog([
    salesJob(job, { start: T0, lateness: '0m', allowedHours: hours, handler: gate.handler }),
  ]);
  const taskQueue = uniqueQueue(job);
  const deps = { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() };
  await withWorker(stack.env, taskQueue, deps, async () => {
    gate.hold(`${job}/${T0}`);
    const run = await stack.env.client.workflow.start('window', {
      taskQueue,
      workflowId: `${job}/${T0}`,
      args: [
        {
          job,
          start: T0,
          end: T1,
          generation: 0,
          key: `${job}/${T0}`,
          trigger: 'manual',
          policy: { ...windowPolicy(1, 60_000), allowedHours: { ...hours, timezone: 'UTC' } },
        },
      ],
    });
    try {
      await eventually(async () => (gate.entered(`${job}/${T0}`) ? true : undefined));
      const outside = new Date(Date.now() + 4 * 3_600_000);
      const g = await eventually(async () => {
        const g = await windowGrid({
          db: stack.t.db,
          client: stack.env.client,
          job: catalog.get(job),
          now: outside,
          from: T0,
          to: T1,
        });
        return states(g)[T0] === 'not-closed' || states(g)[T0] === 'missing' ? undefined : g;
      });
      assert.deepEqual(states(g), { [T0]: 'running' });
    } finally {
      gate.release(`${job}/${T0}`);
      await run.result();
    }
  });
});

test('a job without a declared start: windows before its first one are not missing', async () => {
  const job = 'grid-unstarted';
  const catalog = defineCatalog([salesJob(job, { lateness: '0m' })]);
  const grid = () =>
    windowGrid({
      db: stack.t.db,
      client: stack.env.client,
      job: catalog.get(job),
      now: new Date('2026-06-12T05:30:00Z'),
      from: '2026-06-12T00:00:00Z',
      to: '2026-06-12T06:00:00Z',
    });
  // Never seen by a tick: no window is its to run yet, but those still open.
  assert.deepEqual(Object.values(states(await grid())), [
    'unscheduled',
    'unscheduled',
    'unscheduled',
    'unscheduled',
    'unscheduled',
    'not-closed',
  ]);
  // Its first tick took 02:00 as its first window (the watermark starts there).
  await stack.t.db
    .insertInto('job_watermarks')
    .values({ job, watermark: '2026-06-12T02:00:00Z', updated_at: new Date() })
    .execute();
  const g = await grid();
  assert.deepEqual(Object.values(states(g)), [
    'unscheduled',
    'unscheduled',
    'missing',
    'missing',
    'missing',
    'not-closed',
  ]);
  assert.equal(g.totals.missing, 3);
  assert.equal(g.totals.unscheduled, 2);
});

test("a window's detail shows its effect's attempts and the provider's reply, and no secret", async () => {
  const job = 'grid-report';
  const W = { start: '2026-07-01T00:00:00Z', end: '2026-07-01T01:00:00Z' };
  const withReport = summaryWithMail(() => ({
    attachments: [
      {
        filename: 'orders.csv',
        contentType: 'text/csv',
        contentBase64: Buffer.from('a,b\n').toString('base64'),
      },
    ],
  }));
  const catalog = defineCatalog([
    salesJob(job, {
      start: W.start,
      handler: withReport,
      retry: { maximumAttempts: 3, initialInterval: '100ms', maximumInterval: '200ms' },
    }),
  ]);
  const deps = depsWithChannels(stack.t.db, catalog, channels.smtp, channels.chat);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, 5));
  await withWorker(stack.env, taskQueue, deps, async () => {
    // The server defers the first delivery (a 4xx): two attempts, the second answered with an id.
    channels.smtp.plan.push('defer');
    await windowByHand(stack.env.client, taskQueue, job, W.start, W.end, effectRunPolicy);
  });
  const detail = await windowDetail({
    db: stack.t.db,
    client: stack.env.client,
    config: { TIDEMARK_WEB_UI_URL: 'http://127.0.0.1:8233', TEMPORAL_NAMESPACE: 'default' },
    job: catalog.get(job),
    key: `${job}/${W.start}`,
    now: new Date(),
  });
  assert.equal(detail.state, 'done');
  assert.equal(detail.effects.length, 1);
  const effect = detail.effects[0]!;
  assert.equal(effect.key, `${job}/${W.start}:report`);
  assert.equal(effect.status, 'done');
  assert.deepEqual(
    effect.tries.map((t) => t.outcome),
    ['failed', 'done'],
  );
  assert.match(effect.tries[0]!.error ?? '', /451/);
  // The provider's reply: the message id the SMTP server stored the message under.
  const sent = channels.smtp.messages.at(-1)!;
  assert.equal(effect.providerId, sent.messageId);
  assert.equal(effect.tries[1]!.providerId, sent.messageId);
  assert.deepEqual(effect.request, {
    to: ['ops@example.test'],
    subject: `report ${job}/${W.start}`,
    attachments: ['orders.csv'],
  });
  const json = JSON.stringify(detail);
  assert.ok(!json.includes('test-password') && !json.includes('xoxb-test'), 'no secret in the detail');
  assert.ok(!json.includes(Buffer.from('a,b\n').toString('base64')), 'no attachment content');
  assert.deepEqual(detail.quarantined, {});
});

test('zone and UTC labels across DST changes (Europe/Berlin hours, America/New_York days)', async () => {
  const catalog = defineCatalog([
    salesJob('grid-berlin', { timezone: 'Europe/Berlin' }),
    salesJob('grid-ny', { grid: 'day', timezone: 'America/New_York' }),
    salesJob('grid-berlin-15', { grid: '15m', timezone: 'Europe/Berlin' }),
    salesJob('grid-berlin-1m', { grid: '1m', timezone: 'Europe/Berlin' }),
  ]);
  const grid = (job: string, from: string, to: string) =>
    windowGrid({
      db: stack.t.db,
      client: stack.env.client,
      job: catalog.get(job),
      now: new Date(),
      from,
      to,
    });

  // Spring forward: the 29th of March has 23 hours, no 02:00.
  const spring = await grid('grid-berlin', '2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z');
  assert.deepEqual(
    spring.rows.map((r) => [r.key, r.cells.length]),
    [['2026-03-29', 23]],
  );
  const springCols = spring.rows[0]!.cells.map((c) => c.col);
  assert.ok(!springCols.includes(2), 'no 02:00 on the day clocks skip it');
  const jump = cells(spring).find((c) => c.start === '2026-03-29T00:00:00Z')!;
  assert.equal(jump.local, '2026-03-29 01:00 (UTC+01:00) – 03:00 (UTC+02:00) Europe/Berlin');
  assert.equal(jump.utc, '2026-03-29 00:00 – 01:00 UTC');
  assert.equal(jump.startLocal, '2026-03-29T01:00:00+01:00');

  // Fall back: the 25th of October has 25 hours, 02:00 twice, one cell each, told apart by offset.
  const fall = await grid('grid-berlin', '2026-10-24T22:00:00Z', '2026-10-25T23:00:00Z');
  assert.deepEqual(
    fall.rows.map((r) => [r.key, r.cells.length]),
    [['2026-10-25', 25]],
  );
  const twice = cells(fall).filter((c) => c.col === 2);
  assert.deepEqual(
    twice.map((c) => [c.local, c.utc]),
    [
      ['2026-10-25 02:00 (UTC+02:00) – 02:00 (UTC+01:00) Europe/Berlin', '2026-10-25 00:00 – 01:00 UTC'],
      ['2026-10-25 02:00 – 03:00 Europe/Berlin (UTC+01:00)', '2026-10-25 01:00 – 02:00 UTC'],
    ],
  );
  assert.deepEqual(
    fall.columns.map((c) => c.label),
    Array.from({ length: 24 }, (_, i) => String(i).padStart(2, '0')),
  );

  // Sub-hourly: the repeated hour is two rows of quarter hours, and two hour cells of a minutely week.
  const quarters = await grid('grid-berlin-15', '2026-10-25T00:00:00Z', '2026-10-25T02:00:00Z');
  assert.deepEqual(
    quarters.rows.map((r) => [r.label, r.cells.length]),
    [
      ['2026-10-25 02:00 (+02:00)', 4],
      ['2026-10-25 02:00 (+01:00)', 4],
    ],
  );
  const minutely = await grid('grid-berlin-1m', '2026-10-22T00:00:00Z', '2026-10-29T00:00:00Z');
  assert.equal(minutely.layout.cell, 'hour');
  const day = minutely.rows.find((r) => r.key === '2026-10-25')!;
  assert.equal(day.cells.length, 25);
  assert.deepEqual(
    day.cells.filter((c) => c.col === 2).map((c) => [c.local, 'windows' in c ? c.windows : 0]),
    [
      ['2026-10-25 02:00 (UTC+02:00) – 02:00 (UTC+01:00) Europe/Berlin', 60],
      ['2026-10-25 02:00 – 03:00 Europe/Berlin (UTC+01:00)', 60],
    ],
  );

  // A calendar day in New York the day clocks spring forward: 23 hours, local midnight to midnight.
  const ny = await grid('grid-ny', '2026-03-07T05:00:00Z', '2026-03-10T04:00:00Z');
  assert.deepEqual(ny.layout, { rows: 'month', columns: 'day', cell: 'window' });
  const short = cells(ny).find((c) => c.col === 8)!;
  assert.equal(short.start, '2026-03-08T05:00:00Z');
  assert.equal(short.end, '2026-03-09T04:00:00Z');
  assert.equal(short.local, '2026-03-08 00:00 (UTC-05:00) – 2026-03-09 00:00 (UTC-04:00) America/New_York');
  assert.equal(short.utc, '2026-03-08 05:00 – 2026-03-09 04:00 UTC');
});

test('a minutely job over a week is a grid of hours, one ledger range scan; an hour drills into its minutes', async () => {
  const job = 'grid-minutely';
  const catalog = defineCatalog([salesJob(job, { grid: '1m', lateness: '0m', timezone: 'Asia/Kolkata' })]);
  const now = new Date('2026-09-08T00:00:30Z');
  // Done marks for the last day's windows, written straight to the ledger (the grid only reads them).
  await sql`insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at, finished_at, duration_ms, records_in, records_applied, records_quarantined)
    select ${job}, t, 0, t + interval '1 minute', ${job} || '/' || to_char(t at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'done', 1, 'schedule', t, t, 5, 2, 2, 0
      from generate_series(${'2026-09-07T00:00:00Z'}::timestamptz, ${'2026-09-07T23:59:00Z'}::timestamptz, interval '1 minute') t`.execute(
    stack.t.db,
  );
  const week = await windowGrid({ db: stack.t.db, client: stack.env.client, job: catalog.get(job), now });
  assert.equal(week.windows, 7 * 24 * 60, 'a week back to the window that holds now');
  assert.deepEqual(week.layout, { rows: 'day', columns: 'hour', cell: 'hour' });
  assert.equal(week.totals.done, 1440);
  assert.equal(week.totals['not-closed'], 1);
  // Kolkata is UTC+05:30: its local hours hold the UTC half hours.
  const hour = cells(week).find((c) => c.start === '2026-09-07T00:30:00Z')!;
  assert.equal(hour.kind, 'hour');
  assert.equal(hour.local, '2026-09-07 06:00 – 07:00 Asia/Kolkata (UTC+05:30)');
  assert.deepEqual('states' in hour ? [hour.windows, hour.states, hour.records] : [], [
    60,
    { done: 60 },
    { in: 120, applied: 120, quarantined: 0 },
  ]);
  // Its first half lies before the job's first window (the earliest in its ledger): not missing.
  const split = cells(week).find((c) => c.start === '2026-09-06T23:30:00Z')!;
  assert.deepEqual('states' in split ? [split.state, split.states] : [], [
    'done',
    { unscheduled: 30, done: 30 },
  ]);
  assert.equal(week.totals.missing, 0);
  // Drilling into one hour: one cell per window.
  const drill = await windowGrid({
    db: stack.t.db,
    client: stack.env.client,
    job: catalog.get(job),
    now,
    from: hour.start,
    to: hour.end,
  });
  assert.deepEqual(drill.layout, { rows: 'hour', columns: 'minute', cell: 'window' });
  assert.equal(cells(drill).length, 60);
  assert.deepEqual(
    drill.rows.map((r) => r.label),
    ['2026-09-07 06:00 (+05:30)'],
  );
  // The ledger read is one range scan of the primary key (bounded by job and window_start), which
  // the planner takes over a sequential scan once the table is large: here it is told to. Its
  // statistics are brought up to date first: without them (autovacuum had not analysed the table
  // yet, as on a busy machine) it sometimes costed the status index the same and took it.
  await sql`analyze ${tm.job_windows}`.execute(stack.t.db);
  const plan = await stack.t.db.transaction().execute(async (trx) => {
    await sql`set local enable_seqscan = off`.execute(trx);
    return await ledgerRows(trx, job, new Date(week.from), new Date(week.to)).explain();
  });
  const text = plan.map((r) => String(r['QUERY PLAN'])).join('\n');
  // A plain or a bitmap scan of the primary key: one range either way.
  assert.match(
    text,
    /(Index Scan using job_windows_pk on job_windows|Bitmap Index Scan on job_windows_pk)/,
    text,
  );
  assert.match(
    text,
    /Index Cond: \(\(job = .*\) AND \(window_start >= .*\) AND \(window_start < .*\)\)/,
    text,
  );
});

test('the routes: the grid and a detail; 400 naming from/to, 404 naming the job or the window', async () => {
  const job = 'grid-routes';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
  });
  const app = Fastify();
  // The page's server turns an HttpError into { error } with its status; so does this stand-in.
  app.setErrorHandler((err, _req, reply) => {
    void reply.code(err instanceof HttpError ? err.status : 500).send({ error: (err as Error).message });
  });
  await app.register((a) =>
    windowsRoutes(
      a,
      webDeps({
        db: stack.t.db,
        client: stack.env.client,
        catalog,
        config,
        now: () => new Date('2026-06-01T03:10:00Z'),
      }),
    ),
  );
  const get = async (url: string) => {
    const r = await app.inject({ method: 'GET', url });
    return { status: r.statusCode, body: r.json() as Record<string, unknown> };
  };
  const ok = await get(`/api/jobs/${job}/grid?from=2026-06-01T00:00:00Z&to=2026-06-01T04:00:00Z`);
  assert.equal(ok.status, 200);
  assert.deepEqual(ok.body.totals, {
    done: 0,
    failed: 0,
    running: 0,
    waiting: 0,
    'not-closed': 1,
    missing: 3,
    unscheduled: 0,
    reruns: 0,
  });
  const bad = await get(`/api/jobs/${job}/grid?from=yesterday`);
  assert.equal(bad.status, 400);
  assert.match(String(bad.body.error), /^from: "yesterday" is not an instant; send ISO-8601/);
  const backwards = await get(`/api/jobs/${job}/grid?from=2026-06-02T00:00:00Z&to=2026-06-01T00:00:00Z`);
  assert.equal(backwards.status, 400);
  assert.match(String(backwards.body.error), /^from: .* is not before to/);
  const tooMany = await get(`/api/jobs/${job}/grid?from=2026-06-01T00:00:00Z&to=2033-01-01T00:00:00Z`);
  assert.equal(tooMany.status, 400);
  assert.match(String(tooMany.body.error), /^from: .*narrow the range/);
  const twice = await get(`/api/jobs/${job}/grid?to=2026-06-02T00:00:00Z&to=2026-06-02T00:00:00Z`);
  assert.equal(twice.status, 400);
  assert.match(String(twice.body.error), /^to: given more than once; send it once/);
  const noJob = await get('/api/jobs/nope/grid');
  assert.equal(noJob.status, 404);
  assert.match(String(noJob.body.error), /unknown job "nope"/);

  const key = encodeURIComponent(`${job}/2026-06-01T01:00:00Z`);
  const detail = await get(`/api/jobs/${job}/windows/${key}`);
  assert.equal(detail.status, 200);
  assert.equal(detail.body.key, `${job}/2026-06-01T01:00:00Z`);
  assert.equal(detail.body.state, 'missing');
  const inside = await get(`/api/jobs/${job}/windows/${encodeURIComponent(`${job}/2026-06-01T01:30:00Z`)}`);
  assert.equal(inside.status, 404);
  assert.match(
    String(inside.body.error),
    new RegExp(
      `window "${job}/2026-06-01T01:30:00Z" is not a window of ${job} .*lies in ${job}/2026-06-01T01:00:00Z`,
    ),
  );
  const garbage = await get(`/api/jobs/${job}/windows/nonsense`);
  assert.equal(garbage.status, 404);
  assert.match(String(garbage.body.error), /window "nonsense" is not a window of grid-routes/);
  assert.equal((await get(`/api/jobs/nope/windows/${key}`)).status, 404);
  await app.close();
});

test('through the page server: a session is needed; the grid and a window key with its slash encoded', async () => {
  const job = 'grid-served';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'grid-served-token-41';
  const web = await startWeb(stack, { token, catalog, env: {}, now: () => new Date('2026-06-01T02:10:00Z') });
  try {
    assert.equal((await fetch(`${web.url}/api/jobs/${job}/grid`)).status, 401);
    const cookie = sessionCookie(await postLogin(web.url, token));
    const grid = await fetch(`${web.url}/api/jobs/${job}/grid`, { headers: { cookie } });
    assert.equal(grid.status, 200);
    const g = (await grid.json()) as WindowGrid;
    assert.deepEqual(states(g), {
      '2026-06-01T00:00:00Z': 'missing',
      '2026-06-01T01:00:00Z': 'missing',
      '2026-06-01T02:00:00Z': 'not-closed',
    });
    const key = encodeURIComponent(`${job}/2026-06-01T01:00:00Z`);
    const detail = await fetch(`${web.url}/api/jobs/${job}/windows/${key}`, { headers: { cookie } });
    assert.equal(detail.status, 200);
    assert.equal(((await detail.json()) as { key: string }).key, `${job}/2026-06-01T01:00:00Z`);
    const bad = await fetch(`${web.url}/api/jobs/${job}/grid?to=soon`, { headers: { cookie } });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: string }).error, /^to: "soon" is not an instant/);
  } finally {
    await web.stop();
  }
});
