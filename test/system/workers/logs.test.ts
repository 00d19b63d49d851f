// Logs on a real stack: the outcome lines of real window runs as JSON (their text as msg, the
// outcome as fields), secrets redacted; and `npm run worker` printing JSON lines, SDK lines included.
// A source URL's password in a handler's error stays out of the log line, the activity's span and the
// history; `npm run worker` with a bad variable says why as a JSON error line.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { node } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { OpenTelemetryActivityInboundInterceptor } from '@temporalio/interceptors-opentelemetry';
import { Worker } from '@temporalio/worker';
import { loadConfig } from '../../../config/env.js';
import { defineCatalog } from '../../../schedules/define.js';
import { buildDeps } from '../../../workers/deps.js';
import { createLog, logOptionsFromConfig } from '../../../workers/log.js';
import type { WindowResult } from '../../../contract/workflows.js';
import { createActivities } from '../../../activities/index.js';
import { gatedHandler, insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { freePort } from '../../helpers/net.js';
import { runToEnd } from '../../helpers/spawn.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  windowPolicy,
  withWorker,
  tickAt,
  windowByHand,
  sharedBundle,
} from '../../helpers/temporal.js';

const stack = realStack();

const SMTP_PASSWORD = 'smtp-pass-4417';
const SLACK_BOT_TOKEN = 'xoxb-logs-token-8826';
const DB_PASSWORD = 'db-pass-3310';
const SECRETS = [SMTP_PASSWORD, SLACK_BOT_TOKEN, DB_PASSWORD];

type Line = Record<string, unknown> & { level: string; time: string; msg: string };

/** JSON lines of `text`; every non-empty line must be one. */
function jsonLines(text: string): Line[] {
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => {
      try {
        return JSON.parse(l) as Line;
      } catch {
        throw new Error(`not a JSON line: ${l}`);
      }
    });
}

const pick = (line: Line | undefined, keys: string[]) => Object.fromEntries(keys.map((k) => [k, line?.[k]]));

test('window runs: PROCESSED, SKIPPED and FAILED as JSON lines with their fields; no secret in them', async () => {
  const job = 'logs-sales';
  const failing = 'logs-failing';
  const gate = gatedHandler();
  const catalog = defineCatalog([
    salesJob(job, { start: '2026-03-02T09:00:00Z', handler: gate.handler }),
    salesJob(failing, {
      start: '2026-03-02T09:00:00Z',
      handler: async () => {
        throw new Error(
          `could not reach postgres://app:${DB_PASSWORD}@db.internal/sales (smtp login ${SMTP_PASSWORD})`,
        );
      },
    }),
  ]);
  const config = loadConfig({
    DATABASE_URL: `postgres://app:${DB_PASSWORD}@127.0.0.1:5432/logs`,
    SMTP_PASSWORD,
    SLACK_BOT_TOKEN,
  });
  const stream = new PassThrough();
  let out = '';
  stream.on('data', (d) => (out += d));
  const log = createLog({ ...logOptionsFromConfig(config), destination: stream });
  const deps = buildDeps(config, { db: stack.t.db, catalog, logger: log.logger });
  const taskQueue = uniqueQueue('logs');
  await insertOrders(
    stack.t.db,
    ordersBetween('logs', '2026-03-02T09:00:00Z', '2026-03-02T10:00:00Z', 30, 10),
  );
  const w9 = `${job}/2026-03-02T09:00:00Z`;
  const find = (prefix: string) => jsonLines(out).find((l) => l.msg.startsWith(prefix));

  await withWorker(stack.env, taskQueue, deps, async () => {
    const client = stack.env.client;
    const tick = (now: string) => tickAt(client, taskQueue, job, now);
    gate.hold(w9);
    assert.deepEqual((await tick('2026-03-02T10:05:00Z')).started, [w9]);
    await eventually(async () => (gate.entered(w9) ? true : undefined), 20_000, 'the window in its handler');
    assert.deepEqual((await tick('2026-03-02T10:06:00Z')).running, [w9]);
    gate.release(w9);
    const processed = (await client.workflow.getHandle(w9).result()) as WindowResult;
    assert.equal(processed.outcome, 'processed');
    const again = await windowByHand(client, taskQueue, job, '2026-03-02T09:00:00Z', '2026-03-02T10:00:00Z');
    assert.equal(again.outcome, 'already-done');

    const f9 = `${failing}/2026-03-02T09:00:00Z`;
    await client.workflow
      .execute('window', {
        taskQueue,
        workflowId: f9,
        args: [
          {
            job: failing,
            start: '2026-03-02T09:00:00Z',
            end: '2026-03-02T10:00:00Z',
            generation: 0,
            key: f9,
            trigger: 'manual',
            policy: windowPolicy(1, 30_000),
          },
        ],
      })
      .catch(() => undefined);
    await eventually(async () => find(`FAILED job=${failing} `), 20_000, `a FAILED line:\n${out}`);

    const counts = processed.counts!;
    const p = find(`PROCESSED job=${job} `);
    assert.equal(
      p?.msg,
      `PROCESSED job=${job} window=${w9} input=${counts.input} applied=${counts.applied} quarantined=${counts.quarantined}`,
    );
    assert.equal(p?.level, 'info');
    assert.ok(!Number.isNaN(Date.parse(p.time)), p.time);
    assert.deepEqual(
      pick(p, ['job', 'window', 'outcome', 'generation', 'attempt', 'input', 'applied', 'quarantined']),
      { job, window: w9, outcome: 'processed', generation: 0, attempt: 1, ...counts },
    );
    assert.ok(counts.input === 30 && counts.quarantined === 3, JSON.stringify(counts));

    const running = find(`SKIPPED reason=running job=${job} `);
    assert.equal(running?.msg, `SKIPPED reason=running job=${job} window=${w9}`);
    assert.deepEqual(pick(running, ['job', 'window', 'outcome', 'reason']), {
      job,
      window: w9,
      outcome: 'skipped',
      reason: 'running',
    });

    const done = find(`SKIPPED reason=already-done job=${job} `);
    assert.equal(done?.msg, `SKIPPED reason=already-done job=${job} window=${w9}`);
    assert.deepEqual(pick(done, ['job', 'window', 'outcome', 'reason', 'generation']), {
      job,
      window: w9,
      outcome: 'skipped',
      reason: 'already-done',
      generation: 0,
    });

    const failed = find(`FAILED job=${failing} `);
    assert.match(
      failed!.msg,
      new RegExp(`^FAILED job=${failing} window=${f9} attempt=1: could not reach .*\\*\\*\\*`),
    );
    assert.equal(failed?.level, 'error');
    assert.deepEqual(pick(failed, ['job', 'window', 'outcome', 'attempt', 'generation']), {
      job: failing,
      window: f9,
      outcome: 'failed',
      attempt: 1,
      generation: 0,
    });
    assert.match(String(failed?.reason), /could not reach postgres:\/\/app:\*\*\*@db.internal/);
  });
  for (const secret of SECRETS) assert.ok(!out.includes(secret), `${secret} in:\n${out}`);
});

test('npm run worker: JSON lines on stdout, its own lines and the SDK lines with their meta, no secret', async () => {
  const taskQueue = uniqueQueue('logs-worker');
  const url = new URL(stack.t.url);
  // The test server trusts local connections: the password is only there to be kept out of the logs.
  url.password = DB_PASSWORD;
  const child = spawn('npm', ['run', '--silent', 'worker'], {
    cwd: fileURLToPath(new URL('../../..', import.meta.url)),
    env: {
      ...process.env,
      DATABASE_URL: url.toString(),
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: taskQueue,
      TIDEMARK_SDK_LOG_LEVEL: 'DEBUG',
      TIDEMARK_LOG_FORMAT: '',
      SMTP_PASSWORD,
      SLACK_BOT_TOKEN,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Stopped as a terminal or a service manager stops it: the whole process group.
    detached: true,
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const exited = new Promise<number>((r) =>
    child.once('close', (code, signal) => r(code ?? 128 + constants.signals[signal!])),
  );
  try {
    await eventually(
      async () => (/"msg":"worker polling task queue/.test(out) ? true : undefined),
      120_000,
      `the worker to start:\n${out}\n${err}`,
    );
    const key = 'sales-hourly/2026-03-02T10:00:00Z';
    // A workflow id that carries a secret: the SDK puts it in the meta of its activity lines.
    const workflowId = `logs-${SLACK_BOT_TOKEN}-${key}`;
    const result = (await stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId,
      args: [
        {
          job: 'sales-hourly',
          start: '2026-03-02T10:00:00Z',
          end: '2026-03-02T11:00:00Z',
          generation: 0,
          key,
          trigger: 'manual',
          policy: windowPolicy(1, 30_000),
        },
      ],
    })) as WindowResult;
    assert.equal(result.outcome, 'processed');
    // The SDK's lines are forwarded from its own buffers, after the activity's own line at times:
    // stopped only once both are out (what the assertions below read).
    await eventually(
      async () =>
        out.includes(`"msg":"PROCESSED job=sales-hourly window=${key} `) &&
        jsonLines(out.slice(0, out.lastIndexOf('\n') + 1)).some(
          (l) => l.msg === 'Activity started' && l.activityType === 'processWindow',
        )
          ? true
          : undefined,
      60_000,
      `the PROCESSED line and the SDK's activity line:\n${out}`,
    );
  } finally {
    process.kill(-child.pid!, 'SIGTERM');
  }
  // 0 from the worker; npm reports the signal it was stopped by, as a shell does.
  const code = await exited;
  assert.ok(code === 0 || code === 128 + constants.signals.SIGTERM, `exit ${code}:\n${out}\n${err}`);
  const lines = jsonLines(out);
  const started = lines.find((l) => l.msg.startsWith('worker polling task queue'));
  assert.equal(started?.level, 'info');
  assert.match(started!.msg, /database postgres:\/\/postgres:\*\*\*@/);
  const processed = lines.find((l) => l.msg.startsWith('PROCESSED job=sales-hourly'));
  assert.deepEqual(pick(processed, ['job', 'outcome', 'attempt']), {
    job: 'sales-hourly',
    outcome: 'processed',
    attempt: 1,
  });
  const sdk = lines.find((l) => l.msg === 'Activity started' && l.activityType === 'processWindow');
  assert.ok(sdk, `an SDK activity line:\n${out}`);
  assert.equal(sdk.level, 'debug');
  assert.equal(sdk.workflowId, 'logs-***-sales-hourly/2026-03-02T10:00:00Z');
  assert.equal(sdk.sdkComponent, 'worker');
  // The SDK's native core logs too, forwarded instead of printed to the console on their own.
  assert.ok(
    lines.some((l) => l.sdkComponent === 'core' && l.level === 'debug'),
    `a core line:\n${out}`,
  );
  for (const secret of SECRETS) assert.ok(!`${out}${err}`.includes(secret), `${secret} in:\n${out}\n${err}`);
});

test('npm run worker that cannot start: why, as a JSON error line on stdout, exit code 1', async () => {
  const url = new URL(stack.t.url);
  url.password = DB_PASSWORD;
  const { code, out, err } = await runToEnd('npm', ['run', '--silent', 'worker'], {
    DATABASE_URL: url.toString(),
    // Nothing listens there.
    TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
    TIDEMARK_LOG_FORMAT: '',
  });
  assert.equal(code, 1, `${out}\n${err}`);
  const failed = jsonLines(out).at(-1);
  assert.equal(failed?.level, 'error', out);
  assert.match(failed!.msg, /^worker stopped: .*connect/i);
  assert.ok(!`${out}${err}`.includes(DB_PASSWORD), `${out}\n${err}`);
});

// A window whose handler fails with the password of a source database's URL in its error. The logs
// redact it (any URL's password is a secret there); the activity's span, which the tracing
// interceptor fills from the thrown error, must not carry it either, nor the window's history. And
// `npm run worker` with a bad variable. On a Temporal namespace, database and in-memory tracer
// provider of their own.
describe("a failing window's secret in the log line, the span and the history; a worker that cannot start", () => {
  const exporter = new InMemorySpanExporter();
  const provider = new node.NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  // Registered for these tests only (the tests above run without a tracer provider, as before).
  before(() => {
    provider.register();
  });
  after(() => provider.shutdown());
  const stack = realStack();

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
    const spanText = JSON.stringify({
      status: span.status,
      events: span.events,
      attributes: span.attributes,
    });
    assert.ok(spanText.includes('could not reach'), `the span records the failure: ${spanText}`);
    assert.ok(!spanText.includes(SOURCE_PASSWORD), `the source's password in the span: ${spanText}`);
    assert.ok(!JSON.stringify(history).includes(SOURCE_PASSWORD), "the source's password in the history");
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
});
