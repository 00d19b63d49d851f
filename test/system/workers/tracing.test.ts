// Tracing configured by the standard OTEL_* environment: a worker process started with them sends
// one window's span tree (tick -> window -> processWindow, and its e-mail effect) to a real OTLP/HTTP
// receiver on loopback. Runs started with tracing off replay with it on, and back. Without them,
// this process has no tracer provider and its bundle no tracing interceptors. With the collector down,
// a command's spans are lost, the command is not.
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { trace } from '@opentelemetry/api';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { workflowsPath } from '../../../workers/create-worker.js';
import { windowKey } from '../../../contract/window-key.js';
import {
  clientInterceptors,
  tracing,
  workerTracing,
  workflowTracingModule,
} from '../../../workers/tracing.js';
import { loopbackChannels } from '../../helpers/effects.js';
import { insertOrders, ordersBetween } from '../../helpers/jobs.js';
import { workerProcessEnv } from '../../helpers/processes.js';
import { spawnReady, runToEnd } from '../../helpers/spawn.js';
import { eventually, realStack, sharedBundle, uniqueQueue } from '../../helpers/temporal.js';
import { freePort } from '../../helpers/net.js';

const stack = realStack();
const channels = loopbackChannels();
const workerScript = fileURLToPath(new URL('../../helpers/worker-process.ts', import.meta.url));

interface Span {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  attributes: Record<string, string | number | boolean>;
  service: string;
}

type OtlpValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean };
type OtlpAttribute = { key: string; value: OtlpValue };
interface OtlpRequest {
  resourceSpans: {
    resource: { attributes: OtlpAttribute[] };
    scopeSpans: {
      spans: {
        name: string;
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        attributes?: OtlpAttribute[];
      }[];
    }[];
  }[];
}

const valueOf = (v: OtlpValue) =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.boolValue!);
const attributesOf = (list: OtlpAttribute[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** An OTLP/HTTP (JSON) trace receiver on loopback: keeps every span it is sent. */
async function startReceiver(): Promise<{ url: string; spans: Span[]; server: Server }> {
  const spans: Span[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      const parsed = JSON.parse(body) as OtlpRequest;
      for (const rs of parsed.resourceSpans) {
        const service = String(attributesOf(rs.resource.attributes)['service.name']);
        for (const ss of rs.scopeSpans)
          for (const s of ss.spans)
            spans.push({
              name: s.name,
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? '',
              attributes: attributesOf(s.attributes),
              service,
            });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, server };
}

describe('tracing', () => {
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  before(async () => {
    receiver = await startReceiver();
  });
  after(async () => {
    await new Promise((r) => receiver.server.close(r));
    for (const file of [bundleFile, plainFile]) if (file) await rm(await file, { force: true });
  });

  // The worker bundles its workflows itself (interceptors.workflowModules), or runs a bundle made
  // beforehand with the tracing module, as workers/worker.ts and npm start do (bundleWorkflows()).
  const cases = [
    { how: 'bundled by the worker', job: 'traced-own', day: '2026-10-01', bundle: undefined },
    { how: 'pre-bundled', job: 'traced-pre', day: '2026-10-02', bundle: tracedBundle },
  ];
  for (const c of cases)
    test(`OTEL_* set (${c.how}): one window exports tick -> window -> processWindow, and its effect, with their attributes`, async () => {
      const { job } = c;
      const service = `${job}-worker`;
      await runWindow(
        job,
        c.day,
        {
          ...(c.bundle ? { WORKFLOW_BUNDLE: await c.bundle() } : {}),
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_SERVICE_NAME: service,
          OTEL_BSP_SCHEDULE_DELAY: '100',
        },
        async (key) => {
          const named = (name: string) =>
            receiver.spans.filter((s) => s.service === service && s.name === name);
          const wanted = [
            'RunWorkflow:tick',
            'StartChildWorkflow:window',
            'RunWorkflow:window',
            'StartActivity:processWindow',
            'RunActivity:processWindow',
            'StartActivity:performEffect',
            'RunActivity:performEffect',
            'effect email',
          ];
          await eventually(
            async () => (wanted.every((n) => named(n).length > 0) ? true : undefined),
            60_000,
            `spans ${wanted.join(', ')}`,
          ).catch((err: Error) => {
            throw new Error(
              `${err.message}; received: ${[...new Set(receiver.spans.map((s) => s.name))].join(', ')}`,
            );
          });
          const one = (name: string) => {
            const found = named(name);
            assert.equal(found.length, 1, `one ${name} span: ${JSON.stringify(found)}`);
            return found[0]!;
          };
          const tickSpan = one('RunWorkflow:tick');
          const chain = wanted.map(one);
          // Each span is the child of the one before it, but the effect's activity, which the window's
          // run starts after processWindow (the effect is performed after the commit).
          const parentOf: Record<string, string> = {
            'StartChildWorkflow:window': 'RunWorkflow:tick',
            'RunWorkflow:window': 'StartChildWorkflow:window',
            'StartActivity:processWindow': 'RunWorkflow:window',
            'RunActivity:processWindow': 'StartActivity:processWindow',
            'StartActivity:performEffect': 'RunWorkflow:window',
            'RunActivity:performEffect': 'StartActivity:performEffect',
            'effect email': 'RunActivity:performEffect',
          };
          for (const span of chain) {
            assert.equal(span.traceId, tickSpan.traceId, `${span.name} in the tick's trace`);
            const parent = parentOf[span.name];
            if (parent) assert.equal(span.parentSpanId, one(parent).spanId, `${span.name} under ${parent}`);
          }
          assert.equal(tickSpan.attributes['tidemark.job'], job);
          assert.deepEqual(
            pick(one('RunWorkflow:window').attributes),
            { 'tidemark.job': job, 'tidemark.window.key': key, 'tidemark.generation': 0 },
            'the window run names its window',
          );
          assert.deepEqual(pick(one('RunActivity:processWindow').attributes), {
            'tidemark.job': job,
            'tidemark.window.key': key,
            'tidemark.generation': 0,
            'tidemark.outcome': 'processed',
          });
          const effect = one('effect email');
          assert.deepEqual(pick(effect.attributes), {
            'tidemark.job': job,
            'tidemark.window.key': key,
            'tidemark.effect.key': `${key}:report`,
            'tidemark.effect.channel': 'email',
            'tidemark.outcome': 'done',
          });
          // What was sent stays out of the spans: no recipient, subject or body in any attribute.
          const text = JSON.stringify(
            receiver.spans.filter((s) => s.service === service).map((s) => s.attributes),
          );
          assert.doesNotMatch(text, /ops@example\.test|orders: /);
          assert.equal(channels.smtp.messages.filter((m) => m.subject === `report ${key}`).length, 1);
        },
      );
    });

  test('switching tracing on or off keeps runs replayable: untraced histories on the traced bundle, and back', async () => {
    const traced = await runWindow('replay-traced', '2026-10-03', {
      WORKFLOW_BUNDLE: await tracedBundle(),
      OTEL_TRACES_EXPORTER: 'console',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    const untraced = await runWindow('replay-untraced', '2026-10-04', {
      WORKFLOW_BUNDLE: await untracedBundle(),
    });
    const histories = async (key: string, job: string) =>
      Promise.all([key, `${job}/tick`].map((id) => stack.env.client.workflow.getHandle(id).fetchHistory()));
    const code = async (path: string) => ({ code: await readFile(path, 'utf8') });
    // The traced runs carry the trace to their activities in a header; the untraced ones do not.
    const carriesTrace = (history: Awaited<ReturnType<typeof histories>>[number]) =>
      (history.events ?? []).some(
        (e) => e.activityTaskScheduledEventAttributes?.header?.fields?.['_tracer-data'],
      );
    const untracedHistories = await histories(untraced, 'replay-untraced');
    const tracedHistories = await histories(traced, 'replay-traced');
    assert.deepEqual(untracedHistories.map(carriesTrace), [false, false]);
    assert.deepEqual(tracedHistories.map(carriesTrace), [true, true]);
    for (const history of untracedHistories)
      await Worker.runReplayHistory({ workflowBundle: await code(await tracedBundle()) }, history);
    for (const history of tracedHistories)
      await Worker.runReplayHistory({ workflowBundle: await code(await untracedBundle()) }, history);
  });

  test('no OTEL_* set: no tracer provider, no interceptors, no tracing in the workflow bundle', async () => {
    const otel = Object.keys(process.env).filter((k) => k.startsWith('OTEL_'));
    assert.deepEqual(otel, [], 'this test process runs without OTEL_* variables');
    assert.equal(tracing(), null);
    assert.deepEqual(clientInterceptors(), {});
    assert.deepEqual(workerTracing({ bundlesItself: true }), {});
    const span = trace.getTracer('tidemark-test').startSpan('probe');
    assert.equal(span.isRecording(), false, 'the global tracer is the no-op one');
    span.end();
    assert.doesNotMatch((await sharedBundle()).code, /OpenTelemetryInboundInterceptor/);
  });
});

/**
 * Runs one window of `job` on `day` (its first hour, with a report e-mail) on a worker process with
 * `env` added: a tick at the window's end starts it. `whileRunning` runs before the worker stops.
 */
async function runWindow(
  job: string,
  day: string,
  env: Record<string, string>,
  whileRunning?: (key: string) => Promise<void>,
): Promise<string> {
  const taskQueue = uniqueQueue(job);
  const start = `${day}T00:00:00Z`;
  const end = `${day}T01:00:00Z`;
  const key = windowKey(job, new Date(start));
  await insertOrders(stack.t.db, ordersBetween(job, start, end, 5));
  const worker = await spawnReady(
    workerScript,
    {
      ...workerProcessEnv(stack, taskQueue, {
        name: job,
        grid: '1h',
        start,
        holdMs: 0,
        smtpPort: channels.smtp.port,
      }),
      WORKER_NAME: job,
      ...env,
    },
    `worker ${job}`,
  );
  try {
    const tick = await stack.env.client.workflow.start('tick', {
      taskQueue,
      workflowId: `${job}/tick`,
      args: [{ job, now: end }],
    });
    await tick.result();
    const window = await stack.env.client.workflow.getHandle(key).result();
    assert.equal((window as { outcome: string }).outcome, 'processed', worker.output());
    await whileRunning?.(key);
  } finally {
    await worker.stop('SIGTERM');
  }
  return key;
}

let bundleFile: Promise<string> | undefined;
/** A workflow bundle with the tracing interceptors, as bundleWorkflows() makes it when tracing is on. */
function tracedBundle(): Promise<string> {
  return (bundleFile ??= bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [workflowTracingModule],
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  }).then(async (b) => {
    const path = join(tmpdir(), `tidemark-traced-bundle-${process.pid}.js`);
    await writeFile(path, b.code);
    return path;
  }));
}

let plainFile: Promise<string> | undefined;
/** The bundle of a worker without tracing (the test process's own), as a file. */
function untracedBundle(): Promise<string> {
  return (plainFile ??= sharedBundle().then(async (b) => {
    const path = join(tmpdir(), `tidemark-untraced-bundle-${process.pid}.js`);
    await writeFile(path, b.code);
    return path;
  }));
}

/** The span's tidemark.* attributes. */
function pick(attributes: Span['attributes']): Span['attributes'] {
  return Object.fromEntries(Object.entries(attributes).filter(([k]) => k.startsWith('tidemark.')));
}

// A command run with tracing on while the collector is down: its spans are lost, the command is not.
// On a Temporal namespace and database of its own.
describe('tracing on with the collector down', () => {
  const stack = realStack();

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
        TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
        TIDEMARK_TASK_QUEUE: uniqueQueue('obs-cli'),
        // Nothing listens there.
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}`,
      },
    );
    assert.match(out, /backfill sales-hourly\/backfill-.* started/, `${out}\n${err}`);
    assert.equal(code, 0, `the backfill started, yet the command failed:\n${out}\n${err}`);
  });
});
