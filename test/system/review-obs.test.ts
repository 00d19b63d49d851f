// Review of issue 11's observability: a window whose handler fails with the password of a source
// database's URL in its error. The logs redact it (any URL's password is a secret there); the
// activity's span, which the tracing interceptor fills from the thrown error, must not carry it
// either, nor the window's history. And a command run with tracing on while the collector is down:
// its spans are lost, the command is not. A backfill whose progress query gets no answer (no worker
// polls its queue): Temporal still answers, and the other gauges stay.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, test } from 'node:test';
import { node } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OpenTelemetryActivityInboundInterceptor } from '@temporalio/interceptors-opentelemetry';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../../activities/index.js';
import { loadConfig } from '../../config/env.js';
import { defineCatalog } from '../../schedules/define.js';
import { buildDeps } from '../../workers/deps.js';
import { createLog, logOptionsFromConfig } from '../../workers/log.js';
import { createMetrics } from '../../workers/metrics.js';
import { searchAttributes } from '../../contract/search-attributes.js';
import { parseMetrics, valueOf } from '../helpers/metrics.js';
import { salesJob } from '../helpers/jobs.js';
import { freePort } from '../helpers/net.js';
import { runToEnd } from '../helpers/spawn.js';
import { eventually, realStack, sharedBundle, uniqueQueue, windowPolicy } from '../helpers/temporal.js';

const stack = realStack();
const exporter = new InMemorySpanExporter();
const provider = new node.NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
after(() => provider.shutdown());

const SOURCE_PASSWORD = 'src-pass-7741';

test("a handler's error with a source URL's password: redacted in the log line, the activity's span and the history", async () => {
  const job = 'obs-leak';
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-03-02T09:00:00Z',
      handler: async () => {
        throw new Error(`could not reach postgres://app:${SOURCE_PASSWORD}@db.internal/sales`);
      },
    }),
  ]);
  const config = loadConfig({ DATABASE_URL: stack.t.url });
  const stream = new PassThrough();
  let out = '';
  stream.on('data', (d) => (out += d));
  const log = createLog({ ...logOptionsFromConfig(config), destination: stream });
  const deps = buildDeps(config, { db: stack.t.db, catalog, logger: log.logger });
  const taskQueue = uniqueQueue('obs-leak');
  // A traced worker's activity interceptor (workers/tracing.ts), on this file's in-memory provider.
  const worker = await Worker.create({
    connection: stack.env.nativeConnection,
    namespace: stack.env.namespace ?? 'default',
    taskQueue,
    workflowBundle: await sharedBundle(),
    activities: createActivities(deps),
    interceptors: { activity: [(ctx) => ({ inbound: new OpenTelemetryActivityInboundInterceptor(ctx) })] },
    shutdownGraceTime: '1s',
  });
  const key = `${job}/2026-03-02T09:00:00Z`;
  const history = await worker.runUntil(async () => {
    await stack.env.client.workflow
      .execute('window', {
        taskQueue,
        workflowId: key,
        args: [
          {
            job,
            start: '2026-03-02T09:00:00Z',
            end: '2026-03-02T10:00:00Z',
            generation: 0,
            key,
            trigger: 'manual',
            policy: windowPolicy(1, 30_000),
          },
        ],
      })
      .catch(() => undefined);
    return await stack.env.client.workflow.getHandle(key).fetchHistory();
  });
  const span = await eventually(
    async () => exporter.getFinishedSpans().find((s) => s.name === 'RunActivity:processWindow'),
    20_000,
    'the processWindow span',
  );
  await eventually(async () => (out.includes('FAILED job=') ? true : undefined), 20_000, 'the FAILED line');
  assert.ok(out.includes('postgres://app:***@db.internal/sales'), `the log line redacts it:\n${out}`);
  const spanText = JSON.stringify({ status: span.status, events: span.events, attributes: span.attributes });
  assert.ok(spanText.includes('could not reach'), `the span records the failure: ${spanText}`);
  assert.ok(!spanText.includes(SOURCE_PASSWORD), `the source's password in the span: ${spanText}`);
  assert.ok(!JSON.stringify(history).includes(SOURCE_PASSWORD), "the source's password in the history");
});

test('tracing on, the collector down: a CLI command that started a workflow still exits 0', async () => {
  const { code, out, err } = await runToEnd(
    process.execPath,
    [
      'bin/tidemark.js',
      'backfill',
      'sales-hourly',
      '--from',
      '2026-03-01T00:00:00Z',
      '--to',
      '2026-03-01T02:00:00Z',
      '--no-wait',
    ],
    {
      DATABASE_URL: stack.t.url,
      TEMPORAL_ADDRESS: stack.env.address,
      TIDEMARK_TASK_QUEUE: uniqueQueue('obs-cli'),
      // Nothing listens there.
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
    },
  );
  assert.match(out, /backfill sales-hourly\/backfill-.* started/, `${out}\n${err}`);
  assert.equal(code, 0, `the backfill started, yet the command failed:\n${out}\n${err}`);
});

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
  assert.equal(valueOf(samples, 'tidemark_metrics_source_up', { source: 'temporal' }), 1, 'Temporal answers');
  assert.equal(valueOf(samples, 'tidemark_backfills_running', { job }), 1);
  assert.ok(took < 4_000, `the scrape took ${took} ms`);
});

test('npm run worker with a bad variable: why, as a JSON error line on stdout like any other failure, exit code 1', async () => {
  const { code, out, err } = await runToEnd('npm', ['run', '--silent', 'worker'], {
    DATABASE_URL: stack.t.url,
    TIDEMARK_LOG_LEVEL: 'verbose',
  });
  assert.equal(code, 1, `${out}\n${err}`);
  const last = out.trim().split('\n').at(-1) ?? '';
  const line = (() => {
    try {
      return JSON.parse(last) as { level?: string; msg?: string };
    } catch {
      return {};
    }
  })();
  assert.equal(line.level, 'error', `a JSON error line on stdout; stdout:\n${out}\nstderr:\n${err}`);
  assert.match(line.msg ?? '', /^worker stopped: .*TIDEMARK_LOG_LEVEL/);
});
