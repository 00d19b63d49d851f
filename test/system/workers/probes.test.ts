// Health probes on the real stack: /readyz is 503 naming what is not ready (no worker yet, a worker
// not running, PostgreSQL unreachable) and 200 only while the worker polls and both servers answer;
// /healthz answers throughout. And the worker entry point itself: it prints its metrics address,
// serves tidemark's metrics with the Temporal SDK's own, and is ready once it polls.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { promisify } from 'node:util';
import type { Worker } from '@temporalio/worker';
import { parse } from 'yaml';
import { memoryLogger } from '../../../activities/logger.js';
import { createDb } from '../../../db/database.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createMetrics } from '../../../workers/metrics.js';
import { readiness, startProbeServer, type Readiness } from '../../../workers/probes.js';
import { salesJob } from '../../helpers/jobs.js';
import { scrape, valueOf } from '../../helpers/metrics.js';
import { eventually, realStack, startWorker, uniqueQueue } from '../../helpers/temporal.js';

const stack = realStack();
const run = promisify(execFile);

const probe = async (url: string, path: string) => {
  const res = await fetch(`${url}${path}`);
  return { status: res.status, body: (await res.json()) as Readiness & { status?: string } };
};

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

test('readyz: 503 naming what is not ready, 200 while the worker polls and both servers answer', async () => {
  const catalog = defineCatalog([salesJob('probed')]);
  const deps = { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() };
  const holder: { workers: Worker[] } = { workers: [] };
  const queue = uniqueQueue('probed');
  const unreachable = createDb(`postgres://postgres@127.0.0.1:${await closedPort()}/nowhere`);
  let db = stack.t.db;
  const server = await startProbeServer({
    host: '127.0.0.1',
    port: 0,
    registry: createMetrics({ db: stack.t.db, catalog }).registry,
    ready: () =>
      readiness({ workers: () => holder.workers, db, temporal: stack.env.connection, timeoutMs: 2_000 }),
  });
  try {
    const before = await probe(server.url, '/readyz');
    assert.equal(before.status, 503);
    assert.deepEqual(before.body.checks, { workers: 'not created yet', postgres: 'ok', temporal: 'ok' });
    assert.equal((await probe(server.url, '/healthz')).status, 200);

    const { worker, running } = await startWorker(stack.env, queue, deps);
    holder.workers = [worker];
    const ready = await eventually(
      async () => {
        const r = await probe(server.url, '/readyz');
        return r.status === 200 ? r : undefined;
      },
      20_000,
      'the worker to poll',
    );
    assert.deepEqual(ready.body, { ready: true, checks: { workers: 'ok', postgres: 'ok', temporal: 'ok' } });

    db = unreachable;
    const noDb = await probe(server.url, '/readyz');
    assert.equal(noDb.status, 503);
    assert.equal(noDb.body.ready, false);
    assert.equal(noDb.body.checks.workers, 'ok');
    assert.equal(noDb.body.checks.temporal, 'ok');
    assert.match(noDb.body.checks.postgres, /ECONNREFUSED|connect/);
    assert.equal((await probe(server.url, '/healthz')).status, 200);

    db = stack.t.db;
    worker.shutdown();
    await running;
    const stopped = await probe(server.url, '/readyz');
    assert.equal(stopped.status, 503);
    assert.equal(stopped.body.checks.workers, `task queue "${queue}": state STOPPED`);
    assert.equal((await probe(server.url, '/healthz')).status, 200);
  } finally {
    await server.stop();
    await unreachable.destroy();
  }
});

test('wrong scrape tokens are throttled per address: past twenty a minute, 429, the right one too', async () => {
  const catalog = defineCatalog([salesJob('probe-guess')]);
  let clock = 1_000_000;
  const server = await startProbeServer({
    host: '127.0.0.1',
    port: 0,
    registry: createMetrics({ db: stack.t.db, catalog, snapshotMs: 0 }).registry,
    token: 'the-right-scrape-token',
    now: () => clock,
  });
  const scrapeWith = async (token: string) =>
    (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status;
  try {
    assert.equal(await scrapeWith('the-right-scrape-token'), 200);
    for (let i = 0; i < 20; i++) assert.equal(await scrapeWith(`guess-${i}`), 401);
    assert.equal(await scrapeWith('guess-21'), 429);
    assert.equal(
      await scrapeWith('the-right-scrape-token'),
      429,
      'the right token is no oracle while throttled',
    );
    // The health probes are not the scrape: a kubelet without a token is never throttled.
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    clock += 61_000;
    assert.equal(await scrapeWith('the-right-scrape-token'), 200, 'a minute later');
  } finally {
    await server.stop();
  }
});

const SCRAPE_TOKEN = 'probe-scrape-token-5c2e';

test('the worker prints its metrics address and serves its own and the SDK metrics, ready once it polls', async () => {
  const script = fileURLToPath(new URL('../../../workers/worker.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: {
      ...process.env,
      DATABASE_URL: stack.t.url,
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: uniqueQueue('probes'),
      TIDEMARK_METRICS_HOST: '127.0.0.1',
      TIDEMARK_METRICS_PORT: '0',
      TIDEMARK_METRICS_TOKEN: SCRAPE_TOKEN,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  try {
    const url = await eventually(
      async () => /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(out)?.[1],
      60_000,
      `the metrics address in the output:\n${out}`,
    );
    assert.equal((await probe(url, '/healthz')).status, 200);
    // With a scrape token, /metrics answers it alone; the health probes stay open (a kubelet has none).
    assert.equal((await probe(url, '/metrics')).status, 401);
    await eventually(
      async () => ((await probe(url, '/readyz')).status === 200 ? true : undefined),
      60_000,
      'the worker to be ready',
    );
    // The SDK's metrics come from its own exporter once its pollers have reported.
    const samples = await eventually(
      async () => {
        const s = await scrape(url, SCRAPE_TOKEN);
        return s.some((x) => x.name === 'temporal_worker_task_slots_available') ? s : undefined;
      },
      30_000,
      'temporal_worker_task_slots_available in /metrics',
    );
    const names = [...new Set(samples.map((x) => x.name))].join(' ');
    assert.ok(
      samples.some((x) => x.name === 'temporal_request'),
      names,
    );
    assert.equal(valueOf(samples, 'tidemark_metrics_source_up', { source: 'postgres' }), 1);
    assert.equal(valueOf(samples, 'tidemark_metrics_source_up', { source: 'temporal' }), 1);
    assert.ok(
      samples.some((x) => x.name === 'process_cpu_user_seconds_total'),
      names,
    );

    // The compose file's healthcheck command, pointed at this worker's port, passes (exit 0).
    const compose = parse(
      await readFile(new URL('../../../docker-compose.yml', import.meta.url), 'utf8'),
    ) as {
      services: { worker: { healthcheck: { test: string[] } } };
    };
    const [, command, ...args] = compose.services.worker.healthcheck.test;
    const port = new URL(url).port;
    const check = await run(
      command!,
      args.map((a) => a.replace(':9464/', `:${port}/`)),
    );
    assert.equal(check.stderr, '');
  } finally {
    child.kill('SIGTERM');
    assert.equal(await exited, 0, out);
  }
});

test('the default port taken by another process: a free one instead; a port asked for and taken: an error naming the variable', async () => {
  const registry = createMetrics({ db: stack.t.db, catalog: defineCatalog([salesJob('ports')]) }).registry;
  const first = await startProbeServer({ host: '127.0.0.1', port: undefined, registry });
  const second = await startProbeServer({ host: '127.0.0.1', port: undefined, registry });
  try {
    assert.notEqual(new URL(first.url).port, new URL(second.url).port);
    for (const s of [first, second]) assert.equal((await probe(s.url, '/healthz')).status, 200);
    await assert.rejects(
      startProbeServer({ host: '127.0.0.1', port: Number(new URL(first.url).port), registry }),
      /EADDRINUSE.*TIDEMARK_METRICS_PORT/,
    );
  } finally {
    await first.stop();
    await second.stop();
  }
});
