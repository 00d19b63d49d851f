// Window math: fixed and calendar grids, DST days, month ends, leap days, and two years of
// windows per zone with no gap, no overlap and no duplicate key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DateTime } from 'luxon';
import {
  closedWindows,
  isAligned,
  parseGrid,
  windowAt,
  windowEndAfter,
  windowStartAt,
  windowsFrom,
  windowsInRange,
  type Grid,
} from '../../schedules/windows.js';
import { isoUtc, parseWindowKey, windowKey } from '../../contract/window-key.js';
import { DAY, firstAtOrAfter, occurrences, segmentsOf } from '../helpers/zone-reference.js';

const grid = (text: string): Grid => {
  const g = parseGrid(text);
  if ('error' in g) throw new Error(g.error);
  return g;
};
const hours = (w: { start: Date; end: Date }) => (w.end.getTime() - w.start.getTime()) / 3_600_000;
const at = (iso: string) => new Date(iso);

describe('fixed grids', () => {
  test('align to the UTC epoch whatever the zone', () => {
    const w = windowAt(grid('15m'), 'Asia/Kolkata', at('2026-05-01T10:37:12Z'));
    assert.deepEqual([isoUtc(w.start), isoUtc(w.end)], ['2026-05-01T10:30:00Z', '2026-05-01T10:45:00Z']);
    const d = windowAt(grid('1d'), 'Europe/Berlin', at('2026-03-29T01:00:00Z'));
    assert.equal(hours(d), 24);
    assert.equal(isoUtc(d.start), '2026-03-29T00:00:00Z');
  });
  test('a boundary instant starts the next window (half-open)', () => {
    const w = windowAt(grid('1h'), 'UTC', at('2026-05-01T11:00:00Z'));
    assert.equal(isoUtc(w.start), '2026-05-01T11:00:00Z');
  });
  test('bad grids are refused with the reason', () => {
    for (const [text, fragment] of [
      ['0m', 'too small'],
      ['-1h', 'not a grid'],
      ['30s', 'too small'],
      ['90s', 'whole number'],
      ['hourly', 'not a grid'],
    ] as const) {
      const g = parseGrid(text);
      assert.ok('error' in g && g.error.includes(fragment), `${text}: ${JSON.stringify(g)}`);
    }
  });
});

describe('calendar grids across DST', () => {
  const cases: [string, string, string, number][] = [
    ['Europe/Berlin', 'day', '2026-03-29T12:00:00+02:00', 23],
    ['Europe/Berlin', 'day', '2026-10-25T12:00:00+01:00', 25],
    ['Europe/Berlin', 'day', '2026-06-01T12:00:00+02:00', 24],
    ['America/New_York', 'day', '2026-03-08T12:00:00-04:00', 23],
    ['America/New_York', 'day', '2026-11-01T12:00:00-05:00', 25],
    ['Australia/Lord_Howe', 'day', '2026-04-05T12:00:00+10:30', 24.5],
    ['Australia/Lord_Howe', 'day', '2026-10-04T12:00:00+11:00', 23.5],
  ];
  for (const [zone, unit, inside, expected] of cases) {
    test(`${zone} ${unit} containing ${inside} lasts ${expected} h`, () => {
      const w = windowAt(grid(unit), zone, at(inside));
      assert.equal(hours(w), expected);
      assert.equal(DateTime.fromJSDate(w.start, { zone }).toFormat('HH:mm'), '00:00');
      assert.equal(DateTime.fromJSDate(w.end, { zone }).toFormat('HH:mm'), '00:00');
    });
  }
  test('Berlin day windows are stored as UTC instants', () => {
    const w = windowAt(grid('day'), 'Europe/Berlin', at('2026-03-29T12:00:00Z'));
    assert.deepEqual([isoUtc(w.start), isoUtc(w.end)], ['2026-03-28T23:00:00Z', '2026-03-29T22:00:00Z']);
  });
  test('weeks start on Monday local midnight', () => {
    const w = windowAt(grid('week'), 'Europe/Berlin', at('2026-10-28T12:00:00Z'));
    assert.deepEqual([isoUtc(w.start), isoUtc(w.end)], ['2026-10-25T23:00:00Z', '2026-11-01T23:00:00Z']);
    assert.equal(hours(windowAt(grid('week'), 'Europe/Berlin', at('2026-10-21T12:00:00Z'))), 7 * 24 + 1);
  });
  test('month ends and leap years', () => {
    const feb28 = windowAt(grid('month'), 'UTC', at('2028-02-15T00:00:00Z'));
    assert.equal(hours(feb28) / 24, 29);
    assert.equal(hours(windowAt(grid('month'), 'UTC', at('2027-02-15T00:00:00Z'))) / 24, 28);
    const jan = windowAt(grid('month'), 'America/New_York', at('2026-01-31T23:30:00-05:00'));
    assert.deepEqual([isoUtc(jan.start), isoUtc(jan.end)], ['2026-01-01T05:00:00Z', '2026-02-01T05:00:00Z']);
    const leapDay = windowAt(grid('day'), 'Europe/Berlin', at('2028-02-29T12:00:00Z'));
    assert.equal(DateTime.fromJSDate(leapDay.start, { zone: 'Europe/Berlin' }).toISODate(), '2028-02-29');
    assert.equal(hours(leapDay), 24);
  });
});

describe('a repeated local midnight: the window starts at the first one', () => {
  // Clocks fall back from 01:00 to 00:00: midnight happens twice; the day lasts 25 hours.
  const cases: [string, string, string, string][] = [
    ['America/Havana', '2025-11-02T04:00:00Z', '2025-11-02T05:00:00Z', '2025-11-03T05:00:00Z'],
    ['America/Havana', '2026-11-01T04:00:00Z', '2026-11-01T05:00:00Z', '2026-11-02T05:00:00Z'],
    ['Atlantic/Azores', '2026-10-25T00:00:00Z', '2026-10-25T01:00:00Z', '2026-10-26T01:00:00Z'],
  ];
  for (const [zone, first, second, end] of cases) {
    test(`${zone}: ${first} starts the day, ${second} (midnight again) does not`, () => {
      const day = grid('day');
      assert.equal(isAligned(day, zone, at(first)), true);
      assert.equal(isAligned(day, zone, at(second)), false, 'the second midnight is not a window start');
      for (const inside of [first, second, '2025-11-02T05:30:00Z']) {
        if (!inside.startsWith(first.slice(0, 10))) continue;
        const w = windowAt(day, zone, at(inside));
        assert.deepEqual([isoUtc(w.start), isoUtc(w.end)], [first, end], `window containing ${inside}`);
      }
      assert.equal(hours(windowAt(day, zone, at(second))), 25);
      const before = windowAt(day, zone, at(new Date(Date.parse(first) - 1).toISOString()));
      assert.equal(isoUtc(before.end), first, 'the day before ends at the first midnight');
    });
  }
  test('America/Havana: November 2026 begins on the first of the two midnights of 1 November', () => {
    const month = grid('month');
    assert.equal(isAligned(month, 'America/Havana', at('2026-11-01T04:00:00Z')), true);
    assert.equal(isAligned(month, 'America/Havana', at('2026-11-01T05:00:00Z')), false);
    const w = windowAt(month, 'America/Havana', at('2026-11-01T05:30:00Z'));
    assert.deepEqual([isoUtc(w.start), isoUtc(w.end)], ['2026-11-01T04:00:00Z', '2026-12-01T05:00:00Z']);
    const october = windowAt(month, 'America/Havana', at('2026-10-15T12:00:00Z'));
    assert.equal(isoUtc(october.end), '2026-11-01T04:00:00Z');
  });
});

describe('every IANA zone, 1995 to 2040, against an Intl reference', () => {
  // The reference (test/helpers/zone-reference.ts) knows each zone's offsets from Intl alone; a
  // calendar window starts at the first instant whose local wall time reaches its date. The days
  // checked are those next to each offset change, plus two ordinary days every five years.
  const FROM = Date.UTC(1995, 0, 1);
  const TO = Date.UTC(2041, 0, 1);
  const [day, week, month] = [grid('day'), grid('week'), grid('month')];
  test('day, week and month windows start at the first instant of their local date', () => {
    const failures: string[] = [];
    let checked = 0;
    for (const zone of Intl.supportedValuesOf('timeZone')) {
      const seg = segmentsOf(zone, FROM - 10 * DAY, TO + 40 * DAY);
      const dates = new Set<number>();
      const dateOf = (localMs: number) => Math.floor(localMs / DAY) * DAY;
      for (let i = 1; i < seg.length; i++) {
        const t = seg[i]!.from;
        dates.add(dateOf(t - 1 + seg[i - 1]!.offset));
        dates.add(dateOf(t + seg[i]!.offset));
      }
      for (let y = 1995; y <= 2040; y += 5) dates.add(Date.UTC(y, 0, 1)).add(Date.UTC(y, 6, 15));
      const fail = (d: number, what: string, got: number, want: number) =>
        failures.push(
          `${zone} ${new Date(d).toISOString().slice(0, 10)} ${what}: ${new Date(got).toISOString()}, expected ${new Date(want).toISOString()}`,
        );
      const check = (g: Grid, d: number, next: number) => {
        const s = firstAtOrAfter(seg, d);
        const e = firstAtOrAfter(seg, next);
        if (s >= e) return; // the whole date was skipped (Pacific/Apia, 30 December 2011)
        checked++;
        if (!isAligned(g, zone, new Date(s))) fail(d, `${g.label} start not aligned`, s, s);
        const last = windowStartAt(g, zone, new Date(e - 1)).getTime();
        if (last !== s) fail(d, `${g.label} start of the window's last instant`, last, s);
        const end = windowEndAfter(g, zone, new Date(s)).getTime();
        if (end !== e) fail(d, `${g.label} end`, end, e);
        for (const o of occurrences(seg, d)) {
          if (o === s) continue;
          if (isAligned(g, zone, new Date(o)))
            fail(d, `${g.label} repeated midnight accepted as a start`, o, s);
          const start = windowStartAt(g, zone, new Date(o)).getTime();
          if (start !== s) fail(d, `${g.label} start of the repeated midnight`, start, s);
        }
      };
      for (const d of dates) {
        if (d < FROM || d >= TO) continue;
        check(day, d, d + DAY);
        const date = new Date(d);
        if (date.getUTCDay() === 1) check(week, d, d + 7 * DAY);
        if (date.getUTCDate() === 1)
          check(month, d, Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1));
      }
    }
    assert.ok(checked > 10_000, `only ${checked} dates checked`);
    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} failures in ${checked} dates`);
  });
});

describe('a fall-back past midnight: the local date goes back, the window does not', () => {
  // St. John's fell back at 00:01 NDT to 23:01 NST the day before (until 2011): from 02:31Z the
  // clock reads the 28th again, though the 29th began at 02:30Z. Those instants are in the 29th's
  // window (it started before them), so windowAt must give that window, never one that ended.
  const cases: [string, string, string, [string, string]][] = [
    ['day', 'America/St_Johns', '2006-10-29T03:00:00Z', ['2006-10-29T02:30:00Z', '2006-10-30T03:30:00Z']],
    ['day', 'America/Goose_Bay', '1995-10-29T03:01:00Z', ['1995-10-29T03:00:00Z', '1995-10-30T04:00:00Z']],
    ['month', 'America/St_Johns', '2009-11-01T02:31:00Z', ['2009-11-01T02:30:00Z', '2009-12-01T03:30:00Z']],
  ];
  for (const [unit, zone, instant, [start, end]] of cases) {
    test(`${zone} ${unit}: ${instant} lies in [${start}, ${end})`, () => {
      const w = windowAt(grid(unit), zone, at(instant));
      assert.deepEqual([isoUtc(w.start), isoUtc(w.end)], [start, end]);
      assert.equal(isoUtc(windowStartAt(grid(unit), zone, at(instant))), start);
    });
  }
  test('every zone, 1995 to 2040: each instant next to an offset change lies in its window', () => {
    const failures: string[] = [];
    const [day, week, month] = [grid('day'), grid('week'), grid('month')];
    for (const zone of Intl.supportedValuesOf('timeZone')) {
      const seg = segmentsOf(zone, Date.UTC(1995, 0, 1), Date.UTC(2041, 0, 1));
      for (let i = 1; i < seg.length; i++) {
        for (const t of [seg[i]!.from - 1, seg[i]!.from, seg[i]!.from + 60_000]) {
          for (const g of [day, week, month]) {
            const w = windowAt(g, zone, new Date(t));
            if (!(w.start.getTime() <= t && t < w.end.getTime()))
              failures.push(
                `${zone} ${g.label} ${new Date(t).toISOString()} in [${isoUtc(w.start)}, ${isoUtc(w.end)})`,
              );
          }
        }
      }
    }
    assert.deepEqual(failures.slice(0, 10), [], `${failures.length} instants outside their window`);
  });
});

describe('two years of windows per zone', () => {
  const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kolkata'];
  for (const zone of zones) {
    for (const unit of ['1h', 'day', 'week', 'month']) {
      test(`${zone} ${unit}: no gap, no overlap, no duplicate key`, () => {
        const g = grid(unit);
        const from = at('2026-01-01T00:00:00Z');
        const until = at('2028-01-01T00:00:00Z');
        const all = [...windowsFrom(g, zone, from, (w) => w.start < until)];
        const keys = new Set(all.map((w) => windowKey('j', w.start)));
        assert.equal(keys.size, all.length, 'duplicate keys');
        for (let i = 0; i < all.length; i++) {
          const w = all[i]!;
          assert.ok(w.end > w.start, `empty window at ${isoUtc(w.start)}`);
          assert.equal(
            windowAt(g, zone, w.start).start.getTime(),
            w.start.getTime(),
            `unaligned ${isoUtc(w.start)}`,
          );
          const next = all[i + 1];
          if (next)
            assert.equal(next.start.getTime(), w.end.getTime(), `gap or overlap after ${isoUtc(w.start)}`);
        }
        const expected = { '1h': 17_520 + 0, day: 730, week: 105, month: 24 }[unit]!;
        assert.ok(Math.abs(all.length - expected) <= 1, `${all.length} windows, expected about ${expected}`);
      });
    }
  }
});

describe('closed windows', () => {
  const g = grid('1h');
  test('from the watermark, oldest first, only those past their lateness, at most the cap', () => {
    const base = { grid: g, zone: 'UTC', watermark: at('2026-03-02T10:00:00Z'), latenessMs: 5 * 60_000 };
    assert.deepEqual(
      closedWindows({ ...base, now: at('2026-03-02T12:05:00Z'), limit: 24 }).map((w) => isoUtc(w.start)),
      ['2026-03-02T10:00:00Z', '2026-03-02T11:00:00Z'],
    );
    assert.deepEqual(
      closedWindows({ ...base, now: at('2026-03-02T12:04:59Z'), limit: 24 }).map((w) => isoUtc(w.start)),
      ['2026-03-02T10:00:00Z'],
    );
    assert.equal(closedWindows({ ...base, now: at('2026-03-03T12:05:00Z'), limit: 10 }).length, 10);
    assert.deepEqual(closedWindows({ ...base, now: at('2026-03-02T10:30:00Z'), limit: 24 }), []);
  });
  test('windows in a range: those whose start lies in [from, to)', () => {
    const ws = windowsInRange(g, 'UTC', at('2026-03-02T10:30:00Z'), at('2026-03-02T13:00:00Z'));
    assert.deepEqual(
      ws.map((w) => isoUtc(w.start)),
      ['2026-03-02T11:00:00Z', '2026-03-02T12:00:00Z'],
    );
  });
  test('keys: job, start in UTC, generation suffix for reruns', () => {
    assert.equal(windowKey('sales', at('2026-03-02T10:00:00Z')), 'sales/2026-03-02T10:00:00Z');
    assert.equal(windowKey('sales', at('2026-03-02T10:00:00Z'), 2), 'sales/2026-03-02T10:00:00Z#2');
  });
});

test('parseWindowKey reads back what windowKey writes, and nothing else', () => {
  const start = new Date('2026-03-29T01:00:00Z');
  assert.deepEqual(parseWindowKey('sales', windowKey('sales', start)), { start, generation: 0 });
  assert.deepEqual(parseWindowKey('sales', windowKey('sales', start, 3)), { start, generation: 3 });
  assert.deepEqual(parseWindowKey('a/b', windowKey('a/b', start, 1)), { start, generation: 1 });
  for (const key of [
    'tick',
    'schedules',
    'other/2026-03-29T01:00:00Z',
    'sales/2026-03-29T01:00:00Z#0',
    'sales/2026-03-29T01:00:00Z#x',
    'sales/2026-02-30T01:00:00Z',
    'sales/2026-03-29T01:00:00.000Z',
    'sales/2026-03-29T01:00:00Z/email',
  ])
    assert.equal(parseWindowKey('sales', key), null, key);
});
