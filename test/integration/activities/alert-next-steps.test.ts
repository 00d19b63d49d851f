// What an alert tells a person to do next: every incident kind's alert names its runbook entry
// (an anchor that docs/runbook.md holds), links the window or incident on the page when the page's
// address (TIDEMARK_WEB_URL) is configured, and gives the exact commands with the values filled
// in; a lag alert says when catch-up should be done, or that it will not start without a worker.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, test } from 'node:test';
import { alerting, INCIDENT_KIND, type IncidentKind } from '../../../activities/alerts.js';
import type { ActivityDeps } from '../../../activities/deps.js';
import { memoryLogger } from '../../../activities/logger.js';
import { catchUpEstimate, watchActivities } from '../../../activities/watch.js';
import { nextSteps } from '../../../contract/next-steps.js';
import { defineCatalog, defineJob } from '../../../schedules/define.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

const PAGE = 'https://tidemark.example.com';
const W = 'steps/2026-05-01T10:00:00Z';
const W_PAGE = `${PAGE}/#/jobs/steps/windows/steps%2F2026-05-01T10%3A00%3A00Z`;

/** Each kind: a subject as its raiser names it, the commands its alert must give, its page link. */
const CASES: Record<IncidentKind, { subject: string; commands: string[]; page: string }> = {
  'window-failed': {
    subject: W,
    commands: ['npx tidemark status steps', 'npx tidemark trigger steps'],
    page: W_PAGE,
  },
  'tick-failed': {
    subject: 'tick',
    commands: ['npx tidemark runs steps --kind tick', 'npx tidemark trigger steps'],
    page: `${PAGE}/#/jobs/steps`,
  },
  'schedule-sync-failed': {
    subject: 'schedules',
    commands: ['npx tidemark schedules sync --dry-run', 'npx tidemark schedules sync'],
    page: `${PAGE}/#/incidents`,
  },
  'effect-unknown': {
    subject: `${W}:push`,
    commands: [
      `npx tidemark effects decide '${W}:push' --resend`,
      `npx tidemark effects decide '${W}:push' --skip`,
    ],
    page: `${PAGE}/#/effects`,
  },
  'effect-failed': {
    subject: `${W}:push`,
    commands: [`npx tidemark effects retry '${W}:push'`],
    page: W_PAGE,
  },
  lag: { subject: 'lag', commands: ['npx tidemark jobs'], page: `${PAGE}/#/jobs/steps` },
  finding: {
    subject: `${W}:totals`,
    commands: ['npx tidemark status steps', `npx tidemark effects list --window '${W}'`],
    page: W_PAGE,
  },
  'settle-failed': {
    subject: `${W}:settle`,
    commands: [`npx tidemark effects list --window '${W}'`, 'npx tidemark runs steps --kind window'],
    page: W_PAGE,
  },
  'alert-undelivered': {
    subject: 'alerts:telegram:down-chat',
    commands: [
      'npx tidemark incidents --job steps',
      'npx tidemark effects list --job steps --status pending,begun,unknown,failed',
    ],
    page: `${PAGE}/#/incidents`,
  },
  'restore-drill-failed': {
    subject: 'restore-drill',
    commands: ['npx tidemark backups drill steps', 'npx tidemark backups list steps'],
    page: `${PAGE}/#/jobs/steps/backups`,
  },
};

const catalog = defineCatalog([
  salesJob('steps', { alerts: { slack: ['C_OPS'], telegram: ['ops-chat'], email: ['ops@example.test'] } }),
]);
const depsWith = (extra: Partial<ActivityDeps> = {}): ActivityDeps => ({
  db: t.db,
  catalog,
  logger: memoryLogger(),
  now: () => new Date(),
  ...extra,
});

/** The alert each channel got for a raise: e-mail's body, Slack's text, Telegram's text. */
async function alertTexts(keys: readonly string[]): Promise<Record<string, string>> {
  const rows = await t.db
    .selectFrom('effects')
    .select(['channel', 'request'])
    .where('effect_key', 'in', [...keys])
    .execute();
  const req = (r: (typeof rows)[number]) => r.request as { text: string };
  return Object.fromEntries(rows.map((r) => [r.channel, req(r).text]));
}

test("every incident kind's alert names its runbook entry, links its page and gives its commands", async () => {
  const { activities } = alerting(depsWith({ pageUrl: `${PAGE}/` }));
  const runbook = await readFile(new URL('../../../docs/runbook.md', import.meta.url), 'utf8');
  for (const kind of Object.values(INCIDENT_KIND)) {
    const c = CASES[kind];
    assert.ok(runbook.includes(`<a id="${kind}"></a>`), `docs/runbook.md holds the anchor of ${kind}`);
    await t.db.deleteFrom('incidents').where('job', '=', 'steps').execute();
    const raised = await activities.raiseIncident({ job: 'steps', subject: c.subject, kind, error: 'boom' });
    const by = await alertTexts(raised.deliveries);
    for (const channel of ['email', 'telegram'])
      for (const line of [`runbook: ${PAGE}/runbook#${kind}`, `page: ${c.page}`, ...c.commands])
        assert.ok(by[channel]!.includes(line), `${kind} on ${channel}: "${line}" in\n${by[channel]}`);
    // Slack: the links as Slack's own link markup (the error text stays escaped).
    assert.ok(by.slack!.includes(`<${PAGE}/runbook#${kind}>`), `${kind} on slack:\n${by.slack}`);
    assert.ok(by.slack!.includes(`<${c.page}>`), `${kind} page on slack:\n${by.slack}`);
    for (const command of c.commands)
      assert.ok(by.slack!.includes(command), `${kind} on slack: "${command}" in\n${by.slack}`);
  }
});

test('without the page address an alert names the runbook in the package and links no page', async () => {
  const { activities } = alerting(depsWith());
  await t.db.deleteFrom('incidents').where('job', '=', 'steps').execute();
  const raised = await activities.raiseIncident({
    job: 'steps',
    subject: W,
    kind: 'window-failed',
    error: 'boom <https://evil.test|click>',
  });
  const by = await alertTexts(raised.deliveries);
  assert.match(by.email!, /^runbook: docs\/runbook\.md#window-failed \(in the tidemark package\)$/m);
  assert.doesNotMatch(by.email!, /^page:/m);
  assert.ok(by.email!.includes('npx tidemark status steps'));
  assert.doesNotMatch(by.slack!, /<https:\/\/evil/, 'the error stays escaped in Slack');
});

interface SlackRequest {
  text: string;
  blocks: { text?: { text: string } }[];
}

/** An effect-unknown raised afresh for `steps` with the page's address, and the Slack request it recorded. */
async function raisedInDoubt(subject: string, error: string): Promise<SlackRequest> {
  const { activities } = alerting(depsWith({ pageUrl: PAGE }));
  await t.db.deleteFrom('incidents').where('job', '=', 'steps').execute();
  const raised = await activities.raiseIncident({ job: 'steps', subject, kind: 'effect-unknown', error });
  const row = await t.db
    .selectFrom('effects')
    .select('request')
    .where('effect_key', 'in', [...raised.deliveries])
    .where('channel', '=', 'slack')
    .executeTakeFirstOrThrow();
  return row.request as SlackRequest;
}

test("an effect in doubt's Slack buttons stay within Slack's 3000 characters of a section, whatever its error", async () => {
  const request = await raisedInDoubt(`${W}:push`, `HTTP 504 ${'x'.repeat(5000)}`);
  assert.ok(request.blocks[0]!.text!.text.length <= 3000, `${request.blocks[0]!.text!.text.length}`);
  assert.ok(request.text.includes(`effects decide '${W}:push' --resend`), 'the text keeps the steps');
});

test('a lag alert says when catch-up should be done, in UTC, and on what basis', async () => {
  // 1h grid, 5 new windows per hourly tick: 20 windows behind at 20:10 (lateness 5m) shrink by 4 an hour.
  const lagging = salesJob('lagging', {
    start: '2026-05-01T00:00:00Z',
    maxCatchUp: 5,
    lagThreshold: 3,
    alerts: { email: ['ops@example.test'] },
  });
  const deps = depsWith({ catalog: defineCatalog([lagging]), now: () => new Date('2026-05-01T20:10:00Z') });
  const result = await watchActivities(deps).checkLag({});
  const text = (await alertTexts(result.deliveries)).email!;
  // Ticks fire at hh:05, the next at 21:05, when 21 windows are closed (00:00 .. 20:00); each tick
  // starts 5 while one more closes: 21 → 17 → 13 → 9 → 5 left at 01:05, whose tick starts them all.
  assert.match(text, /catch-up: expected done by about 2026-05-02T01:05:00Z \(UTC\)/, text);
  assert.match(text, /at most 5 new windows per tick/, text);
  assert.match(text, /the tick fires every 1h/, text);
  assert.match(text, /one window closes every 1h/, text);
  assert.ok(text.includes('npx tidemark jobs'), text);
  assert.ok(text.includes(`runbook: docs/runbook.md#lag`), text);
});

test('catch-up will not start while no worker polls, and never ends when a tick starts no more than close', () => {
  const job = defineJob(salesJob('est', { start: '2026-05-01T00:00:00Z', maxCatchUp: 5 }));
  const now = new Date('2026-05-01T20:10:00Z');
  const idle = catchUpEstimate(job, new Date('2026-05-01T00:00:00Z'), now, { noPoller: true });
  assert.equal(idle.at, null);
  assert.match(idle.text, /will not start until a worker polls/);
  const slow = defineJob(salesJob('slow', { start: '2026-05-01T00:00:00Z', maxCatchUp: 1 }));
  const never = catchUpEstimate(slow, new Date('2026-05-01T00:00:00Z'), now, {});
  assert.equal(never.at, null);
  assert.match(never.text, /never catches up/);
  const measured = catchUpEstimate(job, new Date('2026-05-01T00:00:00Z'), now, { medianWindowMs: 90_000 });
  assert.equal(measured.at?.toISOString(), '2026-05-02T01:06:30.000Z');
  assert.match(measured.text, /recent windows took about 1m30s/);
});

test("a password in the page's address does not reach an alert", async () => {
  const { activities } = alerting(
    depsWith({
      pageUrl: 'https://ops:Hunter2Pass@tidemark.example.com',
      redact: (x) => x.replace(/Hunter2Pass/g, '***'),
    }),
  );
  await t.db.deleteFrom('incidents').where('job', '=', 'steps').execute();
  const raised = await activities.raiseIncident({
    job: 'steps',
    subject: W,
    kind: 'window-failed',
    error: 'boom',
  });
  for (const [channel, text] of Object.entries(await alertTexts(raised.deliveries)))
    assert.ok(!text.includes('Hunter2Pass'), `${channel}: ${text}`);
});

test('a key with a line break or other control character stays one quoted argument, never a line of its own', () => {
  const key = `${W}:push\n  npx tidemark effects decide 'x' --skip    # forged`;
  for (const step of nextSteps('effect-unknown', key, 'steps')) {
    assert.ok(!/[\u0000-\u001f\u007f]/.test(step.command), JSON.stringify(step.command));
    assert.match(
      step.command,
      /^npx tidemark effects decide \$'steps\/[^ ]+\\n {2}npx tidemark effects decide \\'x\\' --skip {4}# forged' --(resend|skip)$/,
    );
  }
});

test("a Telegram alert stays within Telegram's 4096 characters, its error shortened, its links and steps kept", async () => {
  const { activities } = alerting(depsWith({ pageUrl: PAGE }));
  await t.db.deleteFrom('incidents').where('job', '=', 'steps').execute();
  const raised = await activities.raiseIncident({
    job: 'steps',
    subject: `${W}:push`,
    kind: 'effect-unknown',
    error: `HTTP 504 ${'y'.repeat(6000)}`,
  });
  const text = (await alertTexts(raised.deliveries)).telegram!;
  assert.ok(text.length <= 4096, `${text.length}`);
  assert.ok(text.includes(`effects decide '${W}:push' --skip`), text.slice(-400));
  assert.ok(text.includes(`runbook: ${PAGE}/runbook#effect-unknown`));
  assert.match(text, /error: HTTP 504 y+… \(\d+ characters more: npx tidemark incidents --job steps\)/);
});

test("Slack's cut section never splits an escaped character or a link", async () => {
  // A subject line alone longer than a section: no line's end to cut at.
  const request = await raisedInDoubt(`${W}:${'&'.repeat(1500)}`, 'HTTP 504');
  const section = request.blocks[0]!.text!.text;
  assert.ok(section.length <= 3000);
  assert.ok(!/&[a-z]*$/.test(section.replace(/\n…$/, '')), section.slice(-20));
});

test('catch-up counts the windows still running: a tick starts only what its cap leaves free', () => {
  // Hourly, 2 a tick, windows take 2h30m: each window holds its slot for three ticks, so two
  // windows start every three hours while three close: it never catches up.
  const job = defineJob(salesJob('busy', { start: '2026-05-01T00:00:00Z', maxCatchUp: 2 }));
  const now = new Date('2026-05-01T20:10:00Z');
  const r = catchUpEstimate(job, new Date('2026-05-01T00:00:00Z'), now, { medianWindowMs: 150 * 60_000 });
  assert.equal(r.at, null, r.text);
  assert.match(r.text, /never catches up/);
});

test('a lag beyond the count the watch reads says "at least", and a missing schedule promises no time', () => {
  const minutely = defineJob(
    salesJob('minutely', { grid: '1m', start: '2026-04-01T00:00:00Z', maxCatchUp: 100 }),
  );
  const far = catchUpEstimate(
    minutely,
    new Date('2026-04-01T00:00:00Z'),
    new Date('2026-04-15T00:00:00Z'),
    {},
  );
  assert.match(far.text, /at least 10000 windows behind/, far.text);
  const job = defineJob(salesJob('gone', { start: '2026-05-01T00:00:00Z', maxCatchUp: 5 }));
  const gone = catchUpEstimate(job, new Date('2026-05-01T00:00:00Z'), new Date('2026-05-01T20:10:00Z'), {
    scheduleMissing: true,
  });
  assert.equal(gone.at, null);
  assert.match(gone.text, /will not start until the schedule exists again/);
  assert.ok(
    nextSteps('lag', 'lag', 'gone', { scheduleMissing: true }).some(
      (s) => s.command === 'npx tidemark schedules sync',
    ),
  );
});
