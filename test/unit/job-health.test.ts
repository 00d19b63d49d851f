// The overview's schedule in words next to the Temporal Schedule's own spec, and the range a
// backfill's workflow id names (the page lists backfills started by the CLI too).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rangeOfId } from '../../operator/backfills.js';
import { cronWords, scheduleOf } from '../../operator/job-health.js';
import { defineJob } from '../../schedules/define.js';

const handler = async () => ({ input: 0, applied: 0, quarantined: 0 });

test('schedule in words and as the Temporal Schedule has it', () => {
  const hourly = defineJob({ name: 'h', grid: '1h', lateness: '5m', handler });
  assert.deepEqual(scheduleOf(hourly.tick), {
    words: 'every hour, 5m after each boundary (UTC)',
    spec: 'interval every 1h offset 5m',
    timezone: 'UTC',
  });
  const quarter = defineJob({ name: 'q', grid: '15m', lateness: '0m', handler });
  assert.equal(scheduleOf(quarter.tick).spec, 'interval every 15m');
  const daily = defineJob({
    name: 'd',
    grid: 'day',
    timezone: 'Europe/Berlin',
    tick: { cron: '15 0 * * *' },
    handler,
  });
  assert.deepEqual(scheduleOf(daily.tick), {
    words: 'every day at 00:15 (Europe/Berlin)',
    spec: 'cron 15 0 * * *',
    timezone: 'Europe/Berlin',
  });
  assert.equal(cronWords('5 * * * *'), 'every hour at :05');
  assert.equal(cronWords('0 */6 * * *'), 'every 6 hours at :00');
  assert.equal(cronWords('30 7 * * 1'), 'every Monday at 07:30');
  assert.equal(cronWords('0 9 * * 1-5'), 'every weekday at 09:00');
  assert.equal(cronWords('0 3 1 * *'), 'on the 1st of every month at 03:00');
  assert.equal(cronWords('0 3 22 * *'), 'on the 22nd of every month at 03:00');
  assert.equal(cronWords('0 3 11 * *'), 'on the 11th of every month at 03:00');
  // Anything else is shown as the expression itself.
  assert.equal(cronWords('0 3 1 1 *'), null);
  assert.equal(
    scheduleOf({ kind: 'cron', cron: '0 3 1 1 *', timezone: 'UTC', derived: false }).words,
    'cron "0 3 1 1 *" (UTC)',
  );
});

test("a backfill's range from its workflow id", () => {
  assert.deepEqual(rangeOfId('sales-hourly/backfill-2026-05-20T00:00:00Z-2026-05-21T00:00:00Z'), {
    from: '2026-05-20T00:00:00Z',
    to: '2026-05-21T00:00:00Z',
  });
  assert.deepEqual(rangeOfId('a-b/backfill-2026-05-20T00:00:00.500Z-2026-05-20T01:00:00Z'), {
    from: '2026-05-20T00:00:00.500Z',
    to: '2026-05-20T01:00:00Z',
  });
  assert.equal(rangeOfId('sales-hourly/2026-05-20T00:00:00Z'), null);
});
