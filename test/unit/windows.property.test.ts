// Property-based tests of the window math (fast-check): random instants in every IANA zone from
// 1995 to 2040, biased toward offset changes and window boundaries, on fixed and calendar grids,
// checked against an independent reference built on Intl alone (test/helpers/zone-reference.ts).
// A failure prints fast-check's seed and path; rerun with them to reproduce it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  isAligned,
  parseGrid,
  windowAt,
  windowEndAfter,
  windowStartAt,
  windowsFrom,
  type Grid,
} from '../../schedules/windows.js';
import { isoUtc } from '../../contract/window-key.js';
import {
  DAY,
  calendarWindowOf,
  segmentsOf,
  wallClock,
  type CalendarUnit,
  type Segment,
} from '../helpers/zone-reference.js';
import { windowsBehind } from '../../activities/watch.js';
import type { Job } from '../../schedules/job.js';

const FROM = Date.UTC(1995, 0, 1);
const TO = Date.UTC(2041, 0, 1);
const ZONES = Intl.supportedValuesOf('timeZone');
const GRIDS = ['1m', '5m', '1h', '90m', '1d', 'day', 'week', 'month'] as const;
const FIXED_MS: Record<string, number> = {
  '1m': 60_000,
  '5m': 300_000,
  '1h': 3_600_000,
  '90m': 5_400_000,
  '1d': DAY,
};

const grid = (text: string): Grid => {
  const g = parseGrid(text);
  if ('error' in g) throw new Error(g.error);
  return g;
};

// A zone's segments over the whole range, and a margin for the windows around its ends (six
// consecutive month windows from late 2040 reach mid 2041), computed once.
const segmentCache = new Map<string, { segments: Segment[]; changes: number[] }>();
function zoneData(zone: string) {
  let z = segmentCache.get(zone);
  if (!z) {
    const segments = segmentsOf(zone, FROM - 40 * DAY, TO + 400 * DAY);
    z = { segments, changes: segments.slice(1).map((s) => s.from) };
    segmentCache.set(zone, z);
  }
  return z;
}

/** The reference window of instant t: epoch arithmetic for fixed grids, Intl segments for calendar ones. */
function referenceWindow(gridText: string, zone: string, t: number): { start: number; end: number } {
  const ms = FIXED_MS[gridText];
  if (ms !== undefined) {
    const start = t - (((t % ms) + ms) % ms);
    return { start, end: start + ms };
  }
  return calendarWindowOf(zoneData(zone).segments, gridText as CalendarUnit, t);
}

/**
 * Zones whose clocks changed within an hour of local midnight at least once in the range (Havana,
 * the Azores, St. John's, Santiago...): the repeated and skipped midnights are found by scanning
 * every zone's segments, so that the cases draw them often rather than by luck.
 */
const MIDNIGHT_ZONES = ZONES.filter((zone) => {
  const { segments } = zoneData(zone);
  return segments.some((s, i) => {
    if (i === 0 || s.from < FROM || s.from >= TO) return false;
    const nearMidnight = (wall: number) => Math.min(wall % DAY, DAY - (wall % DAY)) <= 3_600_000;
    return nearMidnight(s.from + segments[i - 1]!.offset) || nearMidnight(s.from + s.offset);
  });
});

/**
 * A case: a zone (any, or one with a change near midnight), a grid and an instant. The instant
 * is uniform in 1995-2040, or near one of the zone's offset changes (most days have none), or
 * near a boundary of a window (a random one, or the one around an offset change); the distance
 * is a few ms, a few hours or a few days.
 */
const delta = fc.oneof(
  fc.integer({ min: -2_000, max: 2_000 }),
  fc.integer({ min: -3 * 3_600_000, max: 3 * 3_600_000 }),
  fc.integer({ min: -3 * DAY, max: 3 * DAY }),
);
const caseArb = fc
  .record({
    zone: fc.oneof(fc.constantFrom(...ZONES), fc.constantFrom(...MIDNIGHT_ZONES)),
    grid: fc.constantFrom(...GRIDS),
    near: fc.constantFrom('uniform', 'change', 'boundary', 'change-boundary'),
    uniform: fc.integer({ min: FROM, max: TO - 1 }),
    pick: fc.nat(),
    delta,
  })
  .map((c) => {
    let t = c.uniform;
    const changes = zoneData(c.zone).changes.filter((x) => x >= FROM && x < TO);
    const change = changes.length > 0 ? changes[c.pick % changes.length]! : c.uniform;
    if (c.near === 'change') t = change + c.delta;
    else if (c.near === 'boundary' || c.near === 'change-boundary') {
      const w = referenceWindow(c.grid, c.zone, c.near === 'boundary' ? c.uniform : change);
      t = (c.pick % 2 === 0 ? w.start : w.end) + (c.delta % 7_200_000);
    }
    return { zone: c.zone, grid: c.grid, near: c.near, t: Math.min(TO - 1, Math.max(FROM, t)) };
  });

const show = (t: number) => new Date(t).toISOString();
const RUNS = 3_000;

describe('window math, random instants in every IANA zone, 1995-2040 (fast-check)', () => {
  test('each instant lies in exactly one window, the reference one', () => {
    fc.assert(
      fc.property(caseArb, ({ zone, grid: text, t }) => {
        const g = grid(text);
        const ref = referenceWindow(text, zone, t);
        const w = windowAt(g, zone, new Date(t));
        const got = `[${isoUtc(w.start)}, ${isoUtc(w.end)})`;
        assert.equal(
          got,
          `[${show(ref.start)}, ${show(ref.end)})`.replaceAll('.000Z', 'Z'),
          `${zone} ${text} ${show(t)}`,
        );
        assert.ok(w.start.getTime() <= t && t < w.end.getTime(), `${show(t)} outside ${got}`);
        assert.equal(windowStartAt(g, zone, new Date(t)).getTime(), ref.start, 'windowStartAt');
        assert.equal(windowEndAfter(g, zone, w.start).getTime(), ref.end, 'windowEndAfter');
        assert.equal(isAligned(g, zone, w.start), true, 'its start is aligned');
        assert.equal(isAligned(g, zone, new Date(t)), t === ref.start, 'isAligned(t) iff t starts it');
        // Exactly one: the window before ends where this one starts, the next starts where it ends.
        assert.equal(windowAt(g, zone, new Date(ref.start - 1)).end.getTime(), ref.start, 'previous window');
        assert.equal(windowAt(g, zone, new Date(ref.end)).start.getTime(), ref.end, 'next window');
      }),
      { numRuns: RUNS },
    );
  });

  test('windows tile time: consecutive windows from any instant, no gap, no overlap', () => {
    fc.assert(
      fc.property(caseArb, fc.integer({ min: 1, max: 6 }), ({ zone, grid: text, t }, n) => {
        const g = grid(text);
        const ws = [...windowsFrom(g, zone, new Date(t), () => true, n)];
        assert.equal(ws.length, n);
        assert.ok(ws[0]!.start.getTime() <= t && t < ws[0]!.end.getTime(), 'the first contains the instant');
        let at = ws[0]!.start.getTime();
        for (const w of ws) {
          const ref = referenceWindow(text, zone, w.start.getTime());
          assert.equal(w.start.getTime(), at, `gap or overlap at ${show(at)} (${zone} ${text})`);
          assert.deepEqual([w.start.getTime(), w.end.getTime()], [ref.start, ref.end], `${zone} ${text}`);
          assert.ok(w.end > w.start, 'not empty');
          // The window's last instant is still in it.
          assert.equal(windowStartAt(g, zone, new Date(w.end.getTime() - 1)).getTime(), ref.start);
          at = w.end.getTime();
        }
      }),
      { numRuns: RUNS },
    );
  });

  test('a calendar window starts at the first instant of its local date', () => {
    const calendar = caseArb.filter((c) => !(c.grid in FIXED_MS));
    fc.assert(
      fc.property(calendar, ({ zone, grid: text, t }) => {
        const s = windowStartAt(grid(text), zone, new Date(t)).getTime();
        // Read the wall clock from Intl's calendar fields: the start's local date is the
        // period's first date (a Monday, the 1st), it is midnight or the first instant after
        // a skipped midnight, and the instant before it was on an earlier local date.
        const wall = wallClock(zone, s);
        const date = Math.floor(wall / DAY) * DAY;
        const before = wallClock(zone, s - 1);
        const where = `${zone} ${text} ${show(t)}: start ${show(s)} reads ${show(wall)}, before it ${show(before)}`;
        assert.ok(before < date, `the instant before the start is on its date already: ${where}`);
        if (wall !== date) assert.ok(before < date && wall > date, `not midnight and none skipped: ${where}`);
        if (text === 'week') assert.equal(new Date(date).getUTCDay(), 1, `not a Monday: ${where}`);
        if (text === 'month') assert.equal(new Date(date).getUTCDate(), 1, `not the 1st: ${where}`);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('windowsBehind (the watch and the lag gauge)', () => {
  // Counted one window at a time, as the watch did: the reference for the arithmetic on fixed grids.
  const counted = (g: Grid, zone: string, watermark: Date, lastClosedEnd: Date, cap: number) =>
    [...windowsFrom(g, zone, watermark, (w) => w.end <= lastClosedEnd, cap)].length;

  test('on every grid it equals the windows counted one by one, up to the cap', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...GRIDS),
        fc.constantFrom('UTC', 'Europe/Berlin', 'Asia/Kolkata', 'Australia/Lord_Howe', 'America/St_Johns'),
        fc.integer({ min: FROM, max: TO }),
        fc.integer({ min: -3 * DAY, max: 400 * DAY }),
        fc.integer({ min: 0, max: 90 * 60_000 }),
        fc.constantFrom(10, 1_000, 10_000),
        (text, zone, at, ahead, lateness, cap) => {
          const g = grid(text);
          const job = { grid: g, timezone: zone, latenessMs: lateness } as Job;
          const watermark = windowStartAt(g, zone, new Date(at));
          const now = new Date(at + ahead);
          const lastClosedEnd = windowAt(g, zone, new Date(now.getTime() - lateness)).start;
          assert.equal(
            windowsBehind(job, watermark, now, cap),
            counted(g, zone, watermark, lastClosedEnd, cap),
          );
        },
      ),
      { numRuns: 300 },
    );
  });
});
