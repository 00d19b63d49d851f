// Window math: fixed and calendar grids, DST days, month ends, leap days, and two years of
// windows per zone with no gap, no overlap and no duplicate key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DateTime } from 'luxon';
import {
  closedWindows,
  isoUtc,
  parseGrid,
  windowAt,
  windowKey,
  windowsFrom,
  windowsInRange,
  type Grid,
} from '../../schedules/windows.js';

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
