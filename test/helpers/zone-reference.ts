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
