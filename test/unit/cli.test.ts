// The CLI without a server: help, jobs, preview, and errors that name the bad argument.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseWhen } from '../../cli/dates.js';
import { isUsageError, run } from '../../cli/main.js';

async function lines(argv: string[]): Promise<string> {
  const out: string[] = [];
  await run(argv, (l) => out.push(l));
  return out.join('\n');
}

test('preview prints the next fire times and windows', async () => {
  const text = await lines(['preview', 'sales-hourly', '--count', '2', '--now', '2026-03-01T10:30:00Z']);
  assert.match(text, /fires 2026-03-01T11:05:00Z\n {2}fires 2026-03-01T12:05:00Z/);
  assert.match(text, /\[2026-03-01T10:00:00Z, 2026-03-01T11:00:00Z\) {2}processable from 2026-03-01T11:05:00Z/);
});

test('jobs lists the catalog', async () => {
  assert.match(await lines(['jobs']), /^sales-hourly\s+grid 1h/m);
});

test('bad arguments are usage errors that name the argument', async () => {
  const cases: [string[], RegExp][] = [
    [['preview', 'nope'], /unknown job "nope"/],
    [['preview', 'sales-hourly', '--count', '0'], /--count: "0"/],
    [['backfill', 'sales-hourly', '--from', '2026-13-01', '--to', '2026-03-02'], /--from: "2026-13-01" is not a date/],
    [['backfill', 'sales-hourly', '--from', '2026-03-02', '--to', '2026-03-01'], /must be before --to/],
    [['backfill', 'sales-hourly'], /--from and --to are required/],
    [['frobnicate'], /unknown command "frobnicate"/],
    [['preview', 'sales-hourly', '--colour'], /--colour/],
  ];
  for (const [argv, message] of cases) {
    await assert.rejects(run(argv, () => undefined), (err: unknown) => isUsageError(err) && message.test((err as Error).message), argv.join(' '));
  }
});

test('plain dates are read in the job time zone, instants as given', () => {
  assert.equal(parseWhen('--from', '2026-03-29', 'Europe/Berlin').toISOString(), '2026-03-28T23:00:00.000Z');
  assert.equal(parseWhen('--from', '2026-03-29T10:00', 'America/New_York').toISOString(), '2026-03-29T14:00:00.000Z');
  assert.equal(parseWhen('--from', '2026-03-29T10:00:00+02:00', 'UTC').toISOString(), '2026-03-29T08:00:00.000Z');
});
