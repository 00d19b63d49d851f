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

// Berlin: on 2026-03-29 the clock jumps from 02:00 to 03:00 (at 01:00Z); on 2026-10-25 it
// falls back from 03:00 to 02:00 (at 01:00Z). The next opening is found on the wall clock.
const minutes = (n: number) => n * 60_000;
test('spring forward: the opening is the local time, not midnight plus the hours', () => {
  const early = { from: '03:00', to: '06:00' };
  // 00:30 CET; 03:00 CEST is 01:00Z.
  assert.equal(msUntilAllowed(at('2026-03-28T23:30:00Z'), early, 'Europe/Berlin'), minutes(90));
  // An opening that does not exist that day (02:30): the range opens when the clock jumps into it.
  const skipped = { from: '02:30', to: '05:00' };
  assert.equal(msUntilAllowed(at('2026-03-28T23:30:00Z'), skipped, 'Europe/Berlin'), minutes(90));
  assert.equal(msUntilAllowed(at('2026-03-29T01:00:00Z'), skipped, 'Europe/Berlin'), 0);
});
test('fall back: the same night, never the next one', () => {
  const late = { from: '04:00', to: '06:00' };
  // 03:30 CET, after the clocks went back: 04:00 CET is 03:00Z, half an hour away.
  assert.equal(msUntilAllowed(at('2026-10-25T02:30:00Z'), late, 'Europe/Berlin'), minutes(30));
  // 02:30 CET (second pass of that hour): 04:00 CET is 03:00Z.
  assert.equal(msUntilAllowed(at('2026-10-25T01:30:00Z'), late, 'Europe/Berlin'), minutes(90));
  // 02:10 CET, the second pass: the range 02:30-02:45 opens again at 02:30 CET (01:30Z).
  const repeated = { from: '02:30', to: '02:45' };
  assert.equal(msUntilAllowed(at('2026-10-25T01:10:00Z'), repeated, 'Europe/Berlin'), minutes(20));
  // 02:45 CEST, outside 01:00-02:30; at 01:00Z the clock falls back to 02:00 CET, inside.
  const early = { from: '01:00', to: '02:30' };
  assert.equal(msUntilAllowed(at('2026-10-25T00:45:00Z'), early, 'Europe/Berlin'), minutes(15));
  assert.equal(msUntilAllowed(at('2026-10-25T01:00:00Z'), early, 'Europe/Berlin'), 0);
});
