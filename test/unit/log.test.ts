// The process logger: JSON lines with the message and structured fields, a readable pretty mode,
// the Temporal SDK's logger routed through it at its own level, and secrets redacted everywhere.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { memoryLogger } from '../../activities/logger.js';
import { ConfigError, loadConfig } from '../../config/env.js';
import { createLog, logOptionsFromConfig } from '../../workers/log.js';

/** A stream that keeps what was written to it, as stdout would show it. */
function capture() {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d) => (text += d));
  return {
    stream,
    text: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const outcome = 'PROCESSED job=sales window=sales/2026-03-02T10:00:00Z input=40 applied=39 quarantined=1';
const fields = {
  job: 'sales',
  window: 'sales/2026-03-02T10:00:00Z',
  outcome: 'processed',
  generation: 0,
  input: 40,
  applied: 39,
  quarantined: 1,
};

test('json: one line per call with level, time, the message as msg and the fields as fields', () => {
  const out = capture();
  const log = createLog({ format: 'json', level: 'info', destination: out.stream });
  log.logger.info(outcome, fields);
  log.logger.warn('plain warning');
  const [line, warning] = out.lines();
  assert.equal(line?.level, 'info');
  assert.equal(line?.msg, outcome);
  assert.ok(!Number.isNaN(Date.parse(String(line?.time))), `time ${String(line?.time)}`);
  assert.deepEqual(
    Object.fromEntries(Object.keys(fields).map((k) => [k, line?.[k]])),
    fields,
    JSON.stringify(line),
  );
  assert.equal(warning?.level, 'warn');
  assert.equal(warning?.msg, 'plain warning');
});

test('json: below the level nothing is written', () => {
  const out = capture();
  const log = createLog({ format: 'json', level: 'warn', destination: out.stream });
  log.logger.info('not shown');
  log.logger.error('shown');
  assert.deepEqual(
    out.lines().map((l) => l.msg),
    ['shown'],
  );
});

test('pretty: the level and the message on one readable line, fields repeated in it left out', () => {
  const out = capture();
  const log = createLog({ format: 'pretty', level: 'info', destination: out.stream });
  log.logger.info(outcome, fields);
  log.logger.info('[tidemark] schedules synced:\n  + create tidemark:sales-hourly');
  const text = out.text();
  assert.match(text, new RegExp(`INFO.*: ${outcome.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\n`));
  assert.match(text, /\[tidemark\] schedules synced:\n\s+\+ create tidemark:sales-hourly/);
  assert.doesNotMatch(text, /^\s*\{/m, 'no JSON');
  assert.doesNotMatch(text, /quarantined: 1/, 'outcome fields already in the message');
});

test('the SDK logger: its own level (WARN by default), its meta as fields', () => {
  const out = capture();
  const log = createLog({ format: 'json', level: 'info', destination: out.stream });
  const meta = { sdkComponent: 'activity', workflowId: 'wf-1', activityType: 'processWindow', attempt: 2 };
  log.sdk.info('Activity started', meta);
  log.sdk.debug('Activity completed', meta);
  log.sdk.log('WARN', 'Activity failed', { ...meta, error: new Error('boom') });
  const lines = out.lines();
  assert.deepEqual(
    lines.map((l) => l.msg),
    ['Activity failed'],
  );
  assert.equal(lines[0]?.level, 'warn');
  assert.equal(lines[0]?.workflowId, 'wf-1');
  assert.equal(lines[0]?.activityType, 'processWindow');
  assert.equal(lines[0]?.sdkComponent, 'activity');
  assert.equal(lines[0]?.error, 'Error: boom', 'the cause in one line, no stack');

  const verbose = capture();
  const debugLog = createLog({
    format: 'json',
    level: 'info',
    sdkLevel: 'DEBUG',
    destination: verbose.stream,
  });
  debugLog.sdk.debug('Activity started', meta);
  debugLog.sdk.trace('Activity resolved', meta);
  assert.deepEqual(
    verbose.lines().map((l) => [l.level, l.msg, l.workflowId]),
    [['debug', 'Activity started', 'wf-1']],
  );
});

test("the SDK's report of a failed activity is one line with its causes, no stack (stacks at SDK level DEBUG)", () => {
  const failure = Object.assign(
    new Error('Activity task failed', { cause: new Error('the source is unreadable') }),
    {
      name: 'ActivityFailure',
    },
  );
  const meta = { sdkComponent: 'worker', taskQueue: 'q', activityType: 'processWindow', error: failure };
  const out = capture();
  createLog({ format: 'pretty', level: 'info', destination: out.stream }).sdk.warn('Activity failed', meta);
  const lines = out.text().split('\n').filter(Boolean);
  assert.equal(lines.length, 1, out.text());
  assert.match(
    lines[0]!,
    /WARN.*Activity failed.*ActivityFailure: Activity task failed <- Error: the source is unreadable/,
  );
  const detailed = capture();
  createLog({ format: 'json', level: 'info', sdkLevel: 'DEBUG', destination: detailed.stream }).sdk.warn(
    'Activity failed',
    meta,
  );
  assert.match(JSON.stringify(detailed.lines()[0]?.error), /"stack":".*log\.test\.ts/);
});

test('secrets never reach the output: message, string fields, nested fields, errors, SDK meta', () => {
  const config = loadConfig({
    SMTP_HOST: 'smtp.example.test',
    SMTP_PASSWORD: 'smtp-pass-7781',
    SLACK_BOT_TOKEN: 'xoxb-slack-token-5512',
    DATABASE_URL: 'postgres://app:db%2Fpass%409931@127.0.0.1:5432/tidemark',
  });
  const secrets = ['smtp-pass-7781', 'xoxb-slack-token-5512', 'db/pass@9931', 'db%2Fpass%409931'];
  const out = capture();
  const log = createLog({ ...logOptionsFromConfig(config), format: 'json', destination: out.stream });
  log.logger.error(`FAILED job=a window=a/x attempt=1: auth failed for smtp-pass-7781`, {
    job: 'a',
    reason: 'slack said no to xoxb-slack-token-5512',
    url: 'postgres://app:db%2Fpass%409931@127.0.0.1:5432/tidemark',
  });
  log.sdk.warn('Activity failed', {
    workflowId: 'wf-xoxb-slack-token-5512',
    error: new Error('connect postgres://app:db/pass@9931@db failed'),
    nested: {
      deeper: ['smtp-pass-7781'],
      password: 'not-in-the-config',
      headers: { authorization: 'Bearer x1' },
      a: { b: { c: { Token: 'deep-token-3' } } },
    },
  });
  log.pino.info({ token: 'tok-not-configured', auth: { token: 'tok2' } }, 'raw pino');
  const text = out.text();
  for (const s of [
    ...secrets,
    'not-in-the-config',
    'Bearer x1',
    'tok-not-configured',
    'tok2',
    'deep-token-3',
  ])
    assert.ok(!text.includes(s), `${s} in ${text}`);
  const [failed, sdk, raw] = out.lines();
  assert.equal(failed?.msg, 'FAILED job=a window=a/x attempt=1: auth failed for ***');
  assert.equal(failed?.reason, 'slack said no to ***');
  assert.equal(sdk?.workflowId, 'wf-***');
  assert.equal((sdk?.nested as { password: string }).password, '***');
  assert.equal(raw?.token, '***');
});

test('memoryLogger keeps the lines and their fields', () => {
  const logger = memoryLogger();
  logger.info(outcome, fields);
  logger.error('FAILED job=a window=a/x attempt=1: x');
  assert.deepEqual(logger.lines, [outcome, 'FAILED job=a window=a/x attempt=1: x']);
  assert.deepEqual(logger.entries[0], { level: 'info', message: outcome, fields });
});

test('the format and levels come from the environment: json and WARN for the SDK unless set', () => {
  assert.deepEqual(logOptionsFromConfig(loadConfig({})).format, 'json');
  assert.deepEqual(logOptionsFromConfig(loadConfig({})).sdkLevel, 'WARN');
  const set = logOptionsFromConfig(
    loadConfig({
      TIDEMARK_LOG_FORMAT: 'pretty',
      TIDEMARK_LOG_LEVEL: 'debug',
      TIDEMARK_SDK_LOG_LEVEL: 'INFO',
    }),
  );
  assert.deepEqual([set.format, set.level, set.sdkLevel], ['pretty', 'debug', 'INFO']);
  assert.equal(logOptionsFromConfig(loadConfig({}), 'pretty').format, 'pretty');
  assert.equal(
    logOptionsFromConfig(loadConfig({ TIDEMARK_LOG_FORMAT: 'json' }), 'pretty').format,
    'json',
    'the variable wins over the entry point default',
  );
});

test('levels in either case; a bad one is named with the values it may take', () => {
  const c = loadConfig({ TIDEMARK_LOG_LEVEL: 'WARN', TIDEMARK_SDK_LOG_LEVEL: 'info' });
  assert.deepEqual([c.TIDEMARK_LOG_LEVEL, c.TIDEMARK_SDK_LOG_LEVEL], ['warn', 'INFO']);
  assert.throws(
    () => loadConfig({ TIDEMARK_LOG_LEVEL: 'verbose' }),
    (e: unknown) =>
      e instanceof ConfigError && e.variable === 'TIDEMARK_LOG_LEVEL' && /debug/.test(e.message),
  );
  assert.throws(
    () => loadConfig({ TIDEMARK_LOG_FORMAT: 'text' }),
    (e: unknown) =>
      e instanceof ConfigError && e.variable === 'TIDEMARK_LOG_FORMAT' && /pretty/.test(e.message),
  );
});

test('a password in a URL is redacted even when it is not a configured secret', () => {
  const out = capture();
  const log = createLog({ format: 'json', level: 'info', destination: out.stream });
  log.logger.error(
    'FAILED job=sync window=sync/x attempt=1: connect postgres://crm:crm-pw-1@crm.db:5432/crm',
    {
      reason: 'connect postgres://crm:crm-pw-1@crm.db:5432/crm',
      target: 'https://user:s3%2Fcret@example.test/hook',
    },
  );
  log.sdk.warn('Activity failed', { error: new Error('redis://:only-pw@cache:6379 refused') });
  const text = out.text();
  for (const s of ['crm-pw-1', 's3%2Fcret', 'only-pw']) assert.ok(!text.includes(s), `${s} in ${text}`);
  const [failed] = out.lines();
  assert.equal(
    failed?.msg,
    'FAILED job=sync window=sync/x attempt=1: connect postgres://crm:***@crm.db:5432/crm',
  );
  assert.equal(failed?.target, 'https://user:***@example.test/hook');
});

test("a secret deeper than the field walk goes (the SDK's meta: a deep object, an error that is its own cause) is not written", async () => {
  const out = capture();
  const log = createLog({
    format: 'json',
    level: 'info',
    destination: out.stream,
    redact: (t) => t.split('hunter2-deep').join('***'),
  });
  let deep: Record<string, unknown> = { note: 'hunter2-deep at the bottom' };
  for (let i = 0; i < 12; i++) deep = { level: deep };
  const looping = new Error('refused: hunter2-deep');
  looping.cause = looping;
  log.sdk.warn('deep meta', { deep });
  log.sdk.warn('Activity failed', { error: looping });
  await new Promise((r) => setImmediate(r));
  assert.equal(out.lines().length, 2, out.text());
  assert.ok(!out.text().includes('hunter2-deep'), out.text());
});
