// Window math, pure: grids, closed windows after a watermark, window keys. No I/O, no clock.
//
// Fixed grids ("15m", "1h", "1d") align to the UTC epoch. Calendar grids ("day", "week",
// "month") align to local midnight in the job's time zone and are kept as UTC instants, so a
// DST day is 23 or 25 hours long and consecutive windows never overlap or leave a gap. A
// calendar window starts at the FIRST instant of its local date: where clocks fall back onto
// midnight (America/Havana in November) the second midnight is inside the day, not a start;
// where midnight is skipped the day starts at its first existing instant.
import { IANAZone } from 'luxon';
import { formatDuration, parseDuration } from './duration.js';

export type CalendarUnit = 'day' | 'week' | 'month';
export type Grid =
  | { readonly kind: 'fixed'; readonly ms: number; readonly label: string }
  | { readonly kind: 'calendar'; readonly unit: CalendarUnit; readonly label: string };

/** A half-open window [start, end) of one job. */
export interface Window {
  readonly start: Date;
  readonly end: Date;
}

const CALENDAR_UNITS: readonly CalendarUnit[] = ['day', 'week', 'month'];

/** Parses "5m", "1h", "1d" (fixed, UTC) or "day", "week", "month" (calendar, local time). */
export function parseGrid(text: string): Grid | { error: string } {
  if ((CALENDAR_UNITS as readonly string[]).includes(text)) {
    return { kind: 'calendar', unit: text as CalendarUnit, label: text };
  }
  const ms = parseDuration(text);
  if (ms === undefined) {
    return {
      error: `"${text}" is not a grid: use a duration such as "15m", "1h", "1d", or one of day, week, month`,
    };
  }
  if (ms < 60_000)
    return {
      error: `"${text}" is too small: a grid must be a positive whole number of minutes (at least "1m")`,
    };
  if (ms % 60_000 !== 0) return { error: `"${text}" is not a whole number of minutes` };
  return { kind: 'fixed', ms, label: formatDuration(ms) };
}

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** The zone's UTC offset at instant t, in milliseconds. */
function offsetMs(zone: string, t: number): number {
  return IANAZone.create(zone).offset(t) * 60_000;
}

/**
 * The first instant whose local wall time in `zone` is at least `naive` (a local date-time
 * written as if it were UTC): local midnight of a date, the first of two when it repeats, the
 * first existing instant after it when it is skipped.
 */
function firstInstantAtOrAfter(zone: string, naive: number): number {
  // No zone is more than 14 hours from UTC: the instant lies within 15 hours of `naive`.
  const lo = naive - 15 * HOUR_MS;
  const hi = naive + 15 * HOUR_MS;
  const reached = (t: number) => t + offsetMs(zone, t) >= naive;
  // Usually local midnight is naive - offset, with the offset in force before or after it;
  // a candidate counts only if the wall clock had not reached it just before.
  let first: number | undefined;
  for (const offset of new Set([offsetMs(zone, lo), offsetMs(zone, hi)])) {
    const t = naive - offset;
    if (offsetMs(zone, t) === offset && !reached(t - 1) && (first === undefined || t < first)) first = t;
  }
  if (first !== undefined) return first;
  // The clock jumped over it: bisect for the transition.
  let [before, after] = [lo, hi];
  while (after - before > 1) {
    const mid = before + Math.floor((after - before) / 2);
    if (reached(mid)) after = mid;
    else before = mid;
  }
  return after;
}

/** The local date (as UTC midnight of the same y-m-d) on which the calendar window containing t starts. */
function localPeriodStart(unit: CalendarUnit, zone: string, t: number): Date {
  const local = new Date(t + offsetMs(zone, t));
  const [y, m, d] = [local.getUTCFullYear(), local.getUTCMonth(), local.getUTCDate()];
  if (unit === 'day') return new Date(Date.UTC(y, m, d));
  if (unit === 'week') return new Date(Date.UTC(y, m, d - ((local.getUTCDay() + 6) % 7))); // Monday
  return new Date(Date.UTC(y, m, 1));
}

function nextPeriod(unit: CalendarUnit, date: Date): number {
  if (unit === 'day') return date.getTime() + DAY_MS;
  if (unit === 'week') return date.getTime() + 7 * DAY_MS;
  return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
}

/** The start of the window that contains instant t. */
export function windowStartAt(grid: Grid, zone: string, t: Date): Date {
  if (grid.kind === 'fixed') return new Date(Math.floor(t.getTime() / grid.ms) * grid.ms);
  const date = localPeriodStart(grid.unit, zone, t.getTime());
  let start = firstInstantAtOrAfter(zone, date.getTime());
  // A fall-back past midnight (St. John's at 00:01 until 2011) shows the previous date again
  // after the next period began: t then lies in a later window than its local date says.
  for (let end = windowEndAfter(grid, zone, new Date(start)).getTime(); end <= t.getTime();) {
    start = end;
    end = windowEndAfter(grid, zone, new Date(start)).getTime();
  }
  return new Date(start);
}

/** The end of the window that starts at `start` (which must be aligned to the grid). */
export function windowEndAfter(grid: Grid, zone: string, start: Date): Date {
  if (grid.kind === 'fixed') return new Date(start.getTime() + grid.ms);
  const date = localPeriodStart(grid.unit, zone, start.getTime());
  return new Date(firstInstantAtOrAfter(zone, nextPeriod(grid.unit, date)));
}

export function isAligned(grid: Grid, zone: string, t: Date): boolean {
  return windowStartAt(grid, zone, t).getTime() === t.getTime();
}

export function windowAt(grid: Grid, zone: string, t: Date): Window {
  const start = windowStartAt(grid, zone, t);
  return { start, end: windowEndAfter(grid, zone, start) };
}

/** Consecutive windows from `from` (aligned down) while `keep(window)` holds, at most `limit`. */
export function* windowsFrom(
  grid: Grid,
  zone: string,
  from: Date,
  keep: (w: Window) => boolean,
  limit = Infinity,
): Generator<Window> {
  let start = windowStartAt(grid, zone, from);
  for (let n = 0; n < limit; n++) {
    const end = windowEndAfter(grid, zone, start);
    const window = { start, end };
    if (!keep(window)) return;
    yield window;
    start = end;
  }
}

/** True when a window may be processed: it has closed and its lateness has passed. */
export function isClosed(window: Window, now: Date, latenessMs: number): boolean {
  return window.end.getTime() + latenessMs <= now.getTime();
}

/** Closed windows from the watermark forward, oldest first, at most `limit`. */
export function closedWindows(args: {
  grid: Grid;
  zone: string;
  watermark: Date;
  now: Date;
  latenessMs: number;
  limit: number;
}): Window[] {
  const { grid, zone, watermark, now, latenessMs, limit } = args;
  return [...windowsFrom(grid, zone, watermark, (w) => isClosed(w, now, latenessMs), limit)];
}

/** Windows whose start lies in [from, to), oldest first. */
export function windowsInRange(grid: Grid, zone: string, from: Date, to: Date, limit = Infinity): Window[] {
  const first = windowStartAt(grid, zone, from);
  const start = first < from ? windowEndAfter(grid, zone, first) : first;
  return [...windowsFrom(grid, zone, start, (w) => w.start < to, limit)];
}
