// The CLI without a server: help on every command, preview, and usage errors that name the bad
// argument and exit with 2.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { parseWhen } from '../../cli/dates.js';
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
