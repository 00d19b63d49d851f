// The CLI without a server: help on every command, preview, and usage errors that name the bad
// argument and exit with 2.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, RetryState } from '@temporalio/common';
import { redactor } from '../../workers/channels.js';
import { parseWhen } from '../../operator/dates.js';
import { failureMessage } from '../../cli/failure.js';
import { COMMANDS, run } from '../../cli/main.js';

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await run(argv, { out: (l) => out.push(l), err: (l) => err.push(l), json: false, tty: false });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

test('help lists every command, and every command has its own help', async () => {
  const all = await cli(['help']);
  assert.equal(all.code, 0);
  for (const c of COMMANDS) {
    assert.match(all.out, new RegExp(`^  ${c.name} `, 'm'));
    const one = await cli([c.name, '--help']);
    assert.equal(one.code, 0, c.name);
    assert.ok(one.out.includes(`tidemark ${c.usage[0]}`), `${c.name} help shows its usage`);
  }
});

test('preview prints the next fire times and windows, as text and as JSON', async () => {
  const text = await cli(['preview', 'sales-hourly', '--count', '2', '--now', '2026-03-01T10:30:00Z']);
  assert.equal(text.code, 0);
  assert.match(text.out, /fires 2026-03-01T11:05:00Z\n {2}fires 2026-03-01T12:05:00Z/);
  assert.match(
    text.out,
    /\[2026-03-01T10:00:00Z, 2026-03-01T11:00:00Z\) {2}processable from 2026-03-01T11:05:00Z/,
  );
  const json = JSON.parse(
    (await cli(['preview', 'sales-hourly', '--count', '1', '--now', '2026-03-01T10:30:00Z', '--json'])).out,
  );
  assert.deepEqual(json.windows, [
    { start: '2026-03-01T10:00:00Z', end: '2026-03-01T11:00:00Z', processableFrom: '2026-03-01T11:05:00Z' },
  ]);
});

test('bad arguments exit with 2 and name the argument', async () => {
  const cases: [string[], RegExp][] = [
    [['preview', 'nope'], /unknown job "nope"/],
    [['preview', 'sales-hourly', '--count', '0'], /--count: "0"/],
    [
      ['backfill', 'sales-hourly', '--from', '2026-13-01', '--to', '2026-03-02'],
      /--from: "2026-13-01" is not a date/,
    ],
    [['backfill', 'sales-hourly', '--from', '2026-03-02', '--to', '2026-03-01'], /must be before --to/],
    [['backfill', 'sales-hourly'], /--from and --to are required/],
    [
      ['backfill', 'sales-hourly', '--from', '2026-03-01', '--to', '2026-03-02', '--batch', '0'],
      /--batch: "0"/,
    ],
    [
      ['backfill', 'sales-hourly', '--from', '2026-03-01', '--to', '2026-03-02', '--batch', '2.5'],
      /--batch: "2.5"/,
    ],
    [
      ['backfill', 'sales-hourly', '--from', '2026-03-01', '--to', '2026-03-02', '--batch', '100000'],
      /--batch: "100000" is more than 1000/,
    ],
    [
      ['backfill', 'sales-hourly', '--from', '2026-03-01', '--to', '2026-03-02', '--concurrency', '10000000'],
      /--concurrency: "10000000" is more than 1000/,
    ],
    [['pause', 'sales-hourly'], /--reason is required/],
    [['runs', 'sales-hourly', '--kind', 'nap'], /--kind: "nap"/],
    [['effects', 'list', '--status', 'bogus'], /--status: "bogus"/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['preview', 'sales-hourly', '--colour'], /--colour/],
  ];
  for (const [argv, message] of cases) {
    const r = await cli(argv);
    assert.equal(r.code, 2, argv.join(' '));
    assert.match(r.err, message, argv.join(' '));
  }
});

test('the installed command runs the same CLI', () => {
  const bin = fileURLToPath(new URL('../../bin/tidemark.js', import.meta.url));
  assert.match(execFileSync(process.execPath, [bin, 'help'], { encoding: 'utf8' }), /tidemark <command>/);
  assert.equal(spawnSync(process.execPath, [bin, 'preview'], { encoding: 'utf8' }).status, 2);
});

test('plain dates are read in the job time zone, instants as given', () => {
  assert.equal(parseWhen('--from', '2026-03-29', 'Europe/Berlin').toISOString(), '2026-03-28T23:00:00.000Z');
  assert.equal(
    parseWhen('--from', '2026-03-29T10:00', 'America/New_York').toISOString(),
    '2026-03-29T14:00:00.000Z',
  );
  assert.equal(
    parseWhen('--from', '2026-03-29T10:00:00+02:00', 'UTC').toISOString(),
    '2026-03-29T08:00:00.000Z',
  );
});

// Issue 11: refusals that need no server name the bad value and the fix, and start no workflow:
// Temporal's address is one where nothing listens, so reaching for it would say so instead.
test('a rerun of a time that is not a window start names the window that contains it, and starts nothing', async () => {
  process.env.TEMPORAL_ADDRESS = '127.0.0.1:1';
  const hourly = await cli(['rerun', 'sales-hourly', '--window', '2026-03-01T02:30:00Z', '--reason', 'late']);
  assert.equal(hourly.code, 2, hourly.err);
  assert.match(
    hourly.err,
    /--window: 2026-03-01T02:30:00Z is not the start of a window of sales-hourly \(grid "1h" in Europe\/Berlin\); it lies in the window \[2026-03-01T02:00:00Z, 2026-03-01T03:00:00Z\): use --window 2026-03-01T02:00:00Z/,
  );
  assert.doesNotMatch(hourly.err, /Temporal|Workflow execution failed/);
  // A calendar grid: a local time inside a Berlin day names that day's window.
  const daily = await cli(['rerun', 'sales-daily-report', '--window', '2026-03-29T10:00', '--reason', 'x']);
  assert.equal(daily.code, 2, daily.err);
  assert.match(
    daily.err,
    /it lies in the window \[2026-03-28T23:00:00Z, 2026-03-29T22:00:00Z\): use --window 2026-03-28T23:00:00Z/,
  );
});

test('a backfill of windows that have not closed yet says when they will be, and starts nothing', async () => {
  process.env.TEMPORAL_ADDRESS = '127.0.0.1:1';
  const open = await cli([
    'backfill',
    'sales-hourly',
    ...['--from', '2099-01-01T00:00:00Z', '--to', '2099-01-01T03:00:00Z'],
  ]);
  assert.equal(open.code, 1, open.err);
  assert.match(
    open.err,
    /backfill: none of the 3 windows of sales-hourly in this range has closed yet: sales-hourly\/2099-01-01T00:00:00Z may be processed from 2099-01-01T01:05:00Z \(its end plus the job's lateness of 5m\), the last, sales-hourly\/2099-01-01T02:00:00Z, from 2099-01-01T03:05:00Z/,
  );
  assert.doesNotMatch(open.err, /Temporal|Workflow execution failed/);
  // A range in which no window starts is the command line's mistake.
  const empty = await cli([
    'backfill',
    'sales-hourly',
    ...['--from', '2026-03-01T10:15:00Z', '--to', '2026-03-01T10:45:00Z'],
  ]);
  assert.equal(empty.code, 2, empty.err);
  assert.match(
    empty.err,
    /no window of sales-hourly \(grid "1h" in Europe\/Berlin\) starts in \[2026-03-01T10:15:00Z, 2026-03-01T10:45:00Z\); widen --from and --to/,
  );
});

test("a failed workflow's message is its innermost cause, with where it failed, and no secret", () => {
  const notFound = ApplicationFailure.nonRetryable(
    'unknown job "sales-hourly" (known: report)',
    'UnknownJob',
  );
  const activity = (cause: Error, type = 'planBackfill') =>
    new ActivityFailure('Activity task failed', type, '1', RetryState.NON_RETRYABLE_FAILURE, 'w1', cause);
  assert.equal(
    failureMessage(
      new WorkflowFailedError(
        'Workflow execution failed',
        activity(notFound),
        RetryState.RETRY_POLICY_NOT_SET,
      ),
    ),
    'unknown job "sales-hourly" (known: report) (UnknownJob, in activity planBackfill)',
  );
  // Through a child workflow; a plain Error's type ("Error") says nothing and is left out.
  const child = new ChildWorkflowFailure(
    'default',
    { workflowId: 'sales-hourly/2026-03-01T02:00:00Z#1', runId: 'r' },
    'window',
    RetryState.NON_RETRYABLE_FAILURE,
    activity(
      ApplicationFailure.create({ message: 'relation "orders" does not exist', type: 'Error' }),
      'processWindow',
    ),
  );
  assert.equal(
    failureMessage(
      new WorkflowFailedError('Workflow execution failed', child, RetryState.RETRY_POLICY_NOT_SET),
    ),
    'relation "orders" does not exist (in workflow sales-hourly/2026-03-01T02:00:00Z#1, in activity processWindow)',
  );
  // No stack, and the configuration's secrets are redacted.
  const leaky = new Error('password authentication failed: postgres://tidemark:s3cret-pw@db/x');
  const text = failureMessage(
    new WorkflowFailedError('Workflow execution failed', leaky, RetryState.RETRY_POLICY_NOT_SET),
    redactor(['s3cret-pw']),
  );
  assert.equal(text, 'password authentication failed: postgres://tidemark:***@db/x');
  // A connection error without a message of its own (AggregateError) says what its parts say.
  assert.equal(
    failureMessage(new AggregateError([new Error('connect ECONNREFUSED 127.0.0.1:5432')], '')),
    'connect ECONNREFUSED 127.0.0.1:5432',
  );
});
