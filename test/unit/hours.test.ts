// Allowed hours: inside, before, after, and ranges across midnight, in local time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { msUntilAllowed } from '../../schedules/hours.js';

const at = (iso: string) => new Date(iso);

test('inside the range: no wait', () => {
  assert.equal(msUntilAllowed(at('2026-06-10T02:00:00Z'), { from: '01:00', to: '05:00' }, 'UTC'), 0);
});
test('before and after the range: until the next opening', () => {
  assert.equal(
    msUntilAllowed(at('2026-06-10T00:30:00Z'), { from: '01:00', to: '05:00' }, 'UTC'),
    30 * 60_000,
  );
  assert.equal(
    msUntilAllowed(at('2026-06-10T05:00:00Z'), { from: '01:00', to: '05:00' }, 'UTC'),
    20 * 3_600_000,
  );
});
test('a range across midnight', () => {
  const night = { from: '22:00', to: '04:00' };
  assert.equal(msUntilAllowed(at('2026-06-10T23:00:00Z'), night, 'UTC'), 0);
  assert.equal(msUntilAllowed(at('2026-06-10T03:59:59Z'), night, 'UTC'), 0);
  assert.equal(msUntilAllowed(at('2026-06-10T04:00:00Z'), night, 'UTC'), 18 * 3_600_000);
});
test('local time of the job zone, across a DST change', () => {
  // Berlin springs forward on 2026-03-29: 01:00 local on the 29th is 00:00Z.
  assert.equal(
    msUntilAllowed(at('2026-03-28T23:30:00Z'), { from: '01:00', to: '05:00' }, 'Europe/Berlin'),
    30 * 60_000,
  );
  assert.equal(
    msUntilAllowed(at('2026-03-29T01:00:00Z'), { from: '01:00', to: '05:00' }, 'Europe/Berlin'),
    0,
  );
});
