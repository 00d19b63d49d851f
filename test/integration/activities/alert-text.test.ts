// What an incident's alert says on each channel: an error's text is the provider's or the user's
// (an HTTP reply, a note), so in Slack, whose messages read <!channel> and <url|label> as markup,
// it goes escaped: it can neither ping a channel nor dress a link; e-mail and Telegram get it as written.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { alerting } from '../../../activities/alerts.js';
import { memoryLogger } from '../../../activities/logger.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

test("an incident's error reaches Slack escaped, e-mail and Telegram as written", async () => {
  const { activities } = alerting({
    db: t.db,
    catalog: defineCatalog([
      salesJob('alert-text', {
        alerts: { slack: ['C_OPS'], telegram: ['ops-chat'], email: ['ops@example.test'] },
      }),
    ]),
    logger: memoryLogger(),
    now: () => new Date(),
  });
  const error = 'HTTP 400 <!channel> pay here: <https://evil.test/pay|your invoice> & more';
  const raised = await activities.raiseIncident({
    job: 'alert-text',
    subject: 'alert-text/2026-05-01T10:00:00Z:push',
    kind: 'effect-failed',
    error,
  });
  const rows = await t.db
    .selectFrom('effects')
    .select(['channel', 'request'])
    .where('effect_key', 'in', raised.deliveries)
    .execute();
  const by = Object.fromEntries(rows.map((r) => [r.channel, JSON.stringify(r.request)]));
  assert.doesNotMatch(by.slack!, /<!channel>|<https:/);
  assert.match(
    by.slack!,
    /&lt;!channel&gt; pay here: &lt;https:\/\/evil\.test\/pay\|your invoice&gt; &amp; more/,
  );
  assert.ok(by.telegram!.includes(JSON.stringify(error).slice(1, -1)), by.telegram);
  assert.ok(by.email!.includes(JSON.stringify(error).slice(1, -1)), by.email);
});
