// Allowed hours: a local time range (possibly across midnight) in which heavy work may run.
// The next opening is found on the wall clock: on a DST day "03:00" is not midnight plus three
// hours, a skipped opening opens when the clock jumps into the range, and a repeated hour can
// open the range a second time.
import { IANAZone } from 'luxon';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

const msOfDay = (hhmm: string) => {
  const [h, m, s] = hhmm.split(':').map(Number) as [number, number, number | undefined];
  return (h * 3600 + m * 60 + (s ?? 0)) * 1000;
};
const mod = (a: number, n: number) => ((a % n) + n) % n;

/** The first instant after t (up to `limit`) at which the zone's offset differs from its offset at t. */
function nextOffsetChange(offsetAt: (t: number) => number, t: number, limit: number): number {
  const offset = offsetAt(t);
  for (let before = t, probe = Math.min(t + HOUR_MS, limit); ;) {
    if (offsetAt(probe) !== offset) {
      let after = probe;
      while (after - before > 1) {
        const mid = before + Math.floor((after - before) / 2);
        if (offsetAt(mid) === offset) before = mid;
        else after = mid;
      }
      return after;
    }
    if (probe >= limit) return limit;
    before = probe;
    probe = Math.min(probe + HOUR_MS, limit);
  }
}

/** 0 when `now` lies in [from, to) local time in `zone`; else the milliseconds until the range next opens. */
export function msUntilAllowed(now: Date, hours: { from: string; to: string }, zone: string): number {
  const tz = IANAZone.create(zone);
  const offsetAt = (t: number) => tz.offset(t) * 60_000;
  const [from, to] = [msOfDay(hours.from), msOfDay(hours.to)];
  const inside = (wall: number) => {
    const ms = mod(wall, DAY_MS);
    return from <= to ? ms >= from && ms < to : ms >= from || ms < to;
  };
  // Between two offset changes the wall clock runs evenly: in each such stretch the range is
  // either open at its start (the clock jumped into it) or opens when the clock reaches `from`.
  const start = now.getTime();
  const limit = start + 2 * DAY_MS + 2 * HOUR_MS;
  for (let t = start; t < limit;) {
    const offset = offsetAt(t);
    const wall = t + offset;
    if (inside(wall)) return t - start;
    let opens = Math.floor(wall / DAY_MS) * DAY_MS + from;
    if (opens <= wall) opens += DAY_MS;
    const end = nextOffsetChange(offsetAt, t, limit);
    if (opens - offset < end) return opens - offset - start;
    t = end;
  }
  return limit - start;
}
