// /metrics on the real stack: after known runs (the design's timeline, a failing window, a running
// backfill) the counters, the duration histogram and the gauges read from the ledger and from
// Temporal hold exactly what happened. A backfill whose progress query gets no answer does not hold
// the scrape up.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { memoryLogger } from '../../../activities/logger.js';
import { windowsBehind } from '../../../activities/watch.js';
import { recordEffects } from '../../../db/effects.js';
import { readWatermark } from '../../../db/ledger.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createMetrics, type Metrics } from '../../../workers/metrics.js';
import { startProbeServer, type ProbeServer } from '../../../workers/probes.js';
import { searchAttributes } from '../../../contract/search-attributes.js';
import type { BackfillResult, WindowResult } from '../../../contract/workflows.js';
import { gatedHandler, insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { parseMetrics, scrape, valueOf, type Sample } from '../../helpers/metrics.js';
import { startWeb } from '../../helpers/web.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  withWorker,
  tickAt,
  windowByHand,
} from '../../helpers/temporal.js';

let metrics: Metrics;
let probes: ProbeServer;
const stack = realStack(async ({ env, t }) => {
  // Each scrape reads afresh: the tests scrape right after what they change.
  metrics = createMetrics({ db: t.db, catalog, client: env.client, now: () => NOW, snapshotMs: 0 });
  probes = await startProbeServer({ host: '127.0.0.1', port: 0, registry: metrics.registry });
});
after(async () => await probes?.stop());
const NOW = new Date('2026-03-02T12:07:00Z');
const gate = gatedHandler();
const catalog = defineCatalog([
  salesJob('metered', { start: '2026-03-02T09:00:00Z', handler: gate.handler }),
  salesJob('broken', {
    start: '2026-03-02T09:00:00Z',
    retry: { maximumAttempts: 1 },
    handler: () => Promise.reject(new Error('the source is unreachable')),
  }),
  salesJob('filled', { lateness: '0m', start: '2026-03-01T00:00:00Z', handler: gate.handler }),
]);

const deps = () => ({
  db: stack.t.db,
  catalog,
  logger: memoryLogger(),
  now: () => new Date(),
  metrics: metrics.sink,
});
const windows = (s: Sample[], job: string, outcome: string, reason = '') =>
  valueOf(s, 'tidemark_windows_total', { job, outcome, reason });

test('the timeline and a failing window: windows counted by outcome and reason, durations, lag, incidents', async () => {
  const job = 'metered';
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, '2026-03-02T09:00:00Z', '2026-03-02T12:00:00Z', 30));
  await withWorker(stack.env, taskQueue, deps(), async () => {
    const client = stack.env.client;
    const tick = (j: string, now: string) => tickAt(client, taskQueue, j, now);
    const result = (key: string) => client.workflow.getHandle(key).result() as Promise<WindowResult>;

    const r1 = await tick(job, '2026-03-02T10:05:00Z');
    for (const k of r1.started) assert.equal((await result(k)).outcome, 'processed');
    const w10 = `${job}/2026-03-02T10:00:00Z`;
    const w11 = `${job}/2026-03-02T11:00:00Z`;
    gate.hold(w10);
    gate.hold(w11);
    const r2 = await tick(job, '2026-03-02T12:05:00Z');
    await eventually(async () => (gate.entered(w10) && gate.entered(w11) ? true : undefined));
    const r3 = await tick(job, '2026-03-02T12:06:00Z');
    assert.deepEqual(r3.running, [w10, w11]);
    gate.release(w10);
    gate.release(w11);
    for (const k of r2.started) assert.equal((await result(k)).outcome, 'processed');
    const again = await windowByHand(client, taskQueue, job, '2026-03-02T10:00:00Z', '2026-03-02T11:00:00Z');
    assert.equal(again.outcome, 'already-done');

    const broken = await tick('broken', '2026-03-02T09:05:00Z');
    assert.equal(broken.started.length, 0, 'nothing closed yet at 09:05');
    const b = await tick('broken', '2026-03-02T10:05:00Z');
    assert.deepEqual(b.started, ['broken/2026-03-02T09:00:00Z']);
    await assert.rejects(result(b.started[0]!));
    // Its incident is opened by the workflow after the failure: wait for it, not for time.
    await eventually(async () => {
      const open = await stack.t.db
        .selectFrom('incidents')
        .select('id')
        .where('job', '=', 'broken')
        .where('closed_at', 'is', null)
        .execute();
      return open.length > 0 ? true : undefined;
    });
  });

  const s = await scrape(probes.url);
  assert.equal(windows(s, job, 'processed'), 3);
  assert.equal(windows(s, job, 'skipped', 'running'), 2);
  assert.equal(windows(s, job, 'skipped', 'already-done'), 1);
  assert.equal(windows(s, job, 'failed', 'error'), undefined);
  assert.equal(windows(s, 'broken', 'failed', 'error'), 1);
  assert.equal(windows(s, 'broken', 'processed'), undefined);
  assert.equal(valueOf(s, 'tidemark_window_duration_seconds_count', { job, outcome: 'processed' }), 3);
  assert.equal(valueOf(s, 'tidemark_window_duration_seconds_count', { job: 'broken', outcome: 'failed' }), 1);
  // Two windows were held in their handler while the third tick ran: at least that long.
  const sum = valueOf(s, 'tidemark_window_duration_seconds_sum', { job, outcome: 'processed' })!;
  assert.ok(sum > 0, `duration sum ${sum}`);

  // Lag at 12:07 (lateness 5 min): metered is caught up to 12:00; broken's watermark stays at 09:00.
  assert.equal(valueOf(s, 'tidemark_lag_windows', { job }), 0);
  assert.equal(valueOf(s, 'tidemark_lag_windows', { job: 'broken' }), 3);
  for (const j of catalog.jobs) {
    const watermark = (await readWatermark(stack.t.db, j.name)) ?? j.start!;
    assert.equal(valueOf(s, 'tidemark_lag_windows', { job: j.name }), windowsBehind(j, watermark, NOW));
  }

  const incidents = await stack.t.db
    .selectFrom('incidents')
    .select(['job', 'kind'])
    .where('closed_at', 'is', null)
    .execute();
  assert.deepEqual(
    incidents.map((i) => i.job),
    ['broken'],
  );
  assert.equal(valueOf(s, 'tidemark_incidents_open', { job: 'broken', kind: incidents[0]!.kind }), 1);
  assert.deepEqual(
    s.filter((x) => x.name === 'tidemark_incidents_open').map((x) => x.value),
    [1],
  );
  assert.equal(valueOf(s, 'tidemark_metrics_source_up', { source: 'postgres' }), 1);
  assert.equal(valueOf(s, 'tidemark_metrics_source_up', { source: 'temporal' }), 1);
});

test('effects by state and channel are what the effects table holds', async () => {
  const effect = (name: string, channel: string) => ({
    key: `fx/${name}`,
    job: 'metered',
    windowKey: null,
    name,
    channel,
    policy: 'ask' as const,
    request: { to: ['ops@example.test'] },
    providerKey: `fx/${name}`,
  });
  await recordEffects(stack.t.db, [
    effect('a', 'email'),
    effect('b', 'email'),
    effect('c', 'email'),
    effect('d', 'slack'),
    effect('e', 'slack'),
  ]);
  await stack.t.db.updateTable('effects').set({ status: 'done' }).where('name', 'in', ['a', 'b']).execute();
  await stack.t.db.updateTable('effects').set({ status: 'unknown' }).where('name', '=', 'd').execute();

  const s = await scrape(probes.url);
  const fx = s
    .filter((x) => x.name === 'tidemark_effects')
    .map((x) => [x.labels.state, x.labels.channel, x.value]);
  assert.deepEqual(
    fx.sort((a, b) => String(a).localeCompare(String(b))),
    [
      ['done', 'email', 2],
      ['pending', 'email', 1],
      ['pending', 'slack', 1],
      ['unknown', 'slack', 1],
    ],
  );
});

test('a running backfill shows its progress; a finished one is gone from the gauges', async () => {
  const job = 'filled';
  const taskQueue = uniqueQueue(job);
  const held = `${job}/2026-03-01T01:00:00Z`;
  gate.hold(held);
  await withWorker(stack.env, taskQueue, deps(), async () => {
    const handle = await stack.env.client.workflow.start('backfill', {
      taskQueue,
      workflowId: `${job}/backfill`,
      args: [{ job, from: '2026-03-01T00:00:00Z', to: '2026-03-01T03:00:00Z', concurrency: 1 }],
      typedSearchAttributes: searchAttributes('backfill', job),
    });
    await eventually(async () => (gate.entered(held) ? true : undefined), 60_000, 'the held window');
    // Visibility catches up with the start on its own time: wait for the backfill to be listed.
    const s = await eventually(
      async () => {
        const x = await scrape(probes.url);
        return valueOf(x, 'tidemark_backfills_running', { job }) === 1 ? x : undefined;
      },
      30_000,
      'the backfill in the gauges',
    );
    const progress = (state: string) => valueOf(s, 'tidemark_backfill_windows', { job, state });
    assert.deepEqual(
      ['processed', 'already_done', 'running_elsewhere', 'failed', 'in_flight'].map(progress),
      [1, 0, 0, 0, 1],
    );
    gate.release(held);
    const done = (await handle.result()) as BackfillResult;
    assert.equal(done.processed, 3);
    await eventually(
      async () =>
        (await scrape(probes.url)).some((x) => x.name === 'tidemark_backfills_running') ? undefined : true,
      30_000,
      'the finished backfill to leave the gauges',
    );
    assert.equal(windows(await scrape(probes.url), job, 'processed'), 3);

    // Batched: the batch activity's windows are counted one by one, as the window activity decides them.
    const batched = (await stack.env.client.workflow.execute('backfill', {
      taskQueue,
      workflowId: `${job}/backfill-batched`,
      args: [{ job, from: '2026-03-01T03:00:00Z', to: '2026-03-01T07:00:00Z', batch: 2, concurrency: 1 }],
      typedSearchAttributes: searchAttributes('backfill', job),
    })) as BackfillResult;
    assert.equal(batched.processed, 4);
    const s2 = await scrape(probes.url);
    assert.equal(windows(s2, job, 'processed'), 7);
    assert.equal(valueOf(s2, 'tidemark_window_duration_seconds_count', { job, outcome: 'processed' }), 7);
  });
});

test("the page's /metrics answers its scrape token or a logged-in session, nobody else", async () => {
  const token = 'metrics-web-token-3f9a';
  const scrapeToken = 'metrics-scrape-token-77d1';
  const web = await startWeb(stack, { token, catalog, env: { TIDEMARK_METRICS_TOKEN: scrapeToken } });
  try {
    assert.equal((await fetch(`${web.url}/api/state`)).status, 401);
    const anonymous = await fetch(`${web.url}/metrics`);
    assert.equal(anonymous.status, 401);
    assert.match(await anonymous.text(), /TIDEMARK_METRICS_TOKEN/);
    assert.equal(
      (await fetch(`${web.url}/metrics`, { headers: { authorization: 'Bearer wrong-scrape-token' } })).status,
      401,
    );
    // Its gauges read the wall clock: the lag is what the watch counts at some instant of the scrape.
    const before = new Date();
    const s = await scrape(web.url, scrapeToken);
    const after = new Date();
    for (const j of catalog.jobs) {
      const watermark = (await readWatermark(stack.t.db, j.name)) ?? j.start!;
      const lag = valueOf(s, 'tidemark_lag_windows', { job: j.name })!;
      assert.ok(
        windowsBehind(j, watermark, before) <= lag && lag <= windowsBehind(j, watermark, after),
        `${j.name}: ${lag}`,
      );
    }
    assert.equal(valueOf(s, 'tidemark_metrics_source_up', { source: 'postgres' }), 1);
    // A person logged in to the page may read them too (the page's own bearer token).
    const text = await (
      await fetch(`${web.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })
    ).text();
    assert.match(text, /tidemark_lag_windows/);
    assert.ok(!text.includes(token) && !text.includes(scrapeToken), 'no token is in the metrics');
  } finally {
    await web.stop();
  }
});

test('pollers per task queue: a queue that no worker polls (the lag watch with every watch worker gone) shows 0', async () => {
  const polled = uniqueQueue('polled');
  const forgotten = uniqueQueue('forgotten-watch');
  const m = createMetrics({
    db: stack.t.db,
    catalog,
    client: stack.env.client,
    taskQueues: [polled, forgotten],
    snapshotMs: 0,
  });
  await withWorker(stack.env, polled, deps(), async () => {
    // A worker polls as soon as it runs; the server lists it once its first poll arrives.
    const s = await eventually(
      async () => {
        const text = await m.registry.metrics();
        const samples = parseMetrics(text);
        return (valueOf(samples, 'tidemark_task_queue_pollers', { task_queue: polled }) ?? 0) > 0
          ? samples
          : undefined;
      },
      20_000,
      'the worker listed as a poller',
    );
    assert.equal(valueOf(s, 'tidemark_task_queue_pollers', { task_queue: forgotten }), 0);
    assert.equal(valueOf(s, 'tidemark_metrics_source_up', { source: 'temporal' }), 1);
  });
});

// A backfill whose progress query gets no answer (no worker polls its queue): Temporal still answers,
// and the other gauges stay. On a Temporal namespace and database of its own.
describe('a backfill whose progress query gets no answer', () => {
  const stack = realStack();

  test('a backfill whose progress query gets no answer: counted running, Temporal up, the scrape not held to the timeout', async () => {
    const client = stack.env.client;
    const job = 'obs-bf';
    const catalog = defineCatalog([salesJob(job, { start: '2026-03-01T00:00:00Z' })]);
    await client.workflow.start('backfill', {
      // Nobody polls it: the backfill runs, its query waits for a worker.
      taskQueue: uniqueQueue('obs-nobody'),
      workflowId: `${job}/backfill-unanswered`,
      args: [{ job, from: '2026-03-01T00:00:00Z', to: '2026-03-01T02:00:00Z', concurrency: 1 }],
      typedSearchAttributes: searchAttributes('backfill', job),
    });
    await eventually(
      async () => {
        for await (const w of client.workflow.list({
          query: `TidemarkKind = "backfill" AND TidemarkJob = "${job}"`,
        }))
          return w;
        return undefined;
      },
      20_000,
      'the backfill listed',
    );
    const metrics = createMetrics({ db: stack.t.db, catalog, client, timeoutMs: 5_000 });
    const started = Date.now();
    const samples = parseMetrics(await metrics.registry.metrics());
    const took = Date.now() - started;
    assert.equal(
      valueOf(samples, 'tidemark_metrics_source_up', { source: 'temporal' }),
      1,
      'Temporal answers',
    );
    assert.equal(valueOf(samples, 'tidemark_backfills_running', { job }), 1);
    assert.ok(took < 4_000, `the scrape took ${took} ms`);
  });
});
