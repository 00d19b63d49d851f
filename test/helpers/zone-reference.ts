// An independent reference for local midnights, built on Intl.DateTimeFormat only (no luxon):
// a zone's offset history as segments, found by scanning offsets and bisecting each change.
const DAY = 86_400_000;
const formats = new Map<string, Intl.DateTimeFormat>();

/** The zone's UTC offset at instant t in ms, read from Intl's "GMT+05:30" / "GMT". */
export function intlOffset(zone: string, t: number): number {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' });
    formats.set(zone, f);
  }
  const text = f.format(t);
  const m = /GMT(?:([+-])(\d\d):(\d\d)(?::(\d\d))?)?$/.exec(text);
  if (!m) throw new Error(`unexpected offset text "${text}" in ${zone}`);
  if (!m[1]) return 0;
  const ms = (Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4] ?? 0)) * 1000;
  return m[1] === '-' ? -ms : ms;
}

/** From `from` on (until the next segment), the zone's offset is `offset`. */
export interface Segment {
  readonly from: number;
  readonly offset: number;
}

/**
 * The zone's offset segments over [from, to). The scan step must be shorter than the shortest
 * time between two changes of one zone (about 7 days in 1995-2040: Boa Vista in October 2000),
 * so that no change and its reversal hide inside one step.
 */
export function segmentsOf(zone: string, from: number, to: number, step = 5 * DAY): Segment[] {
  const segments: Segment[] = [{ from: -Infinity, offset: intlOffset(zone, from) }];
  for (let t = from; t < to; t += step) {
    const a = intlOffset(zone, t);
    if (intlOffset(zone, t + step) === a) continue;
    // Bisect in whole seconds (every change in this range is on a whole second).
    let lo = t;
    let hi = t + step;
    while (hi - lo > 1000) {
      const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
      if (intlOffset(zone, mid) === a) lo = mid;
      else hi = mid;
    }
    segments.push({ from: hi, offset: intlOffset(zone, hi) });
  }
  return segments;
}

/**
 * The first instant whose local wall time is at least `naive` (a local date-time written as if
 * it were UTC): within each segment local time runs on with the segment's offset, so the first
 * instant there is max(segment start, naive - offset), if it lies in the segment.
 */
export function firstAtOrAfter(segments: readonly Segment[], naive: number): number {
  let best = Infinity;
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    const end = segments[i + 1]?.from ?? Infinity;
    const t = Math.max(s.from, naive - s.offset);
    if (t < end && t < best) best = t;
  }
  return best;
}

/** Every instant at which the local wall clock reads exactly `naive` (two when it repeats). */
export function occurrences(segments: readonly Segment[], naive: number): number[] {
  const found: number[] = [];
  for (let i = 0; i < segments.length; i++) {
    const s = segments[i]!;
    const end = segments[i + 1]?.from ?? Infinity;
    const t = naive - s.offset;
    if (t >= s.from && t < end) found.push(t);
  }
  return found;
}

export { DAY };

/** The offset in force at instant t according to the segments. */
export function offsetAt(segments: readonly Segment[], t: number): number {
  let offset = segments[0]!.offset;
  for (const s of segments) {
    if (s.from > t) break;
    offset = s.offset;
  }
  return offset;
}

export type CalendarUnit = 'day' | 'week' | 'month';

/** The local date (UTC midnight of the same y-m-d) that begins the period containing local date `date`. */
function periodOf(unit: CalendarUnit, date: number): number {
  const d = new Date(date);
  if (unit === 'day') return date;
  if (unit === 'week') return date - ((d.getUTCDay() + 6) % 7) * DAY; // weeks begin on Monday
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
}

function shiftPeriod(unit: CalendarUnit, period: number, n: number): number {
  if (unit === 'day') return period + n * DAY;
  if (unit === 'week') return period + n * 7 * DAY;
  const d = new Date(period);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + n, 1);
}

/**
 * The calendar window [start, end) containing instant t, from first principles: every period's
 * boundary is the first instant whose wall clock reaches the period's first local date, and t
 * lies between two consecutive distinct boundaries. The periods tried are those around the
 * local date of t (a fall-back past midnight shows a date that already ended).
 */
export function calendarWindowOf(
  segments: readonly Segment[],
  unit: CalendarUnit,
  t: number,
): { start: number; end: number } {
  const date = Math.floor((t + offsetAt(segments, t)) / DAY) * DAY;
  const p = periodOf(unit, date);
  for (let n = -2; n <= 2; n++) {
    const start = firstAtOrAfter(segments, shiftPeriod(unit, p, n));
    const end = firstAtOrAfter(segments, shiftPeriod(unit, p, n + 1));
    if (start <= t && t < end) return { start, end };
  }
  throw new Error(`no ${unit} window around ${new Date(t).toISOString()}`);
}

const wallFormats = new Map<string, Intl.DateTimeFormat>();

/**
 * The wall clock at instant t in `zone`, as a local date-time written as if it were UTC, read
 * from Intl's calendar fields (not from the offset text that segments are built on).
 */
export function wallClock(zone: string, t: number): number {
  let f = wallFormats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      era: 'short',
    });
    wallFormats.set(zone, f);
  }
  const parts: Record<string, string> = {};
  for (const p of f.formatToParts(t)) parts[p.type] = p.value;
  const year = parts.era === 'BC' ? 1 - Number(parts.year) : Number(parts.year);
  const ms = ((t % 1000) + 1000) % 1000;
  return Date.UTC(
    year,
    Number(parts.month) - 1,
    Number(parts.day),
    Number(parts.hour),
    Number(parts.minute),
    Number(parts.second),
    ms,
  );
}
