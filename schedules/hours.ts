// Allowed hours: a local time range (possibly across midnight) in which heavy work may run.
import { DateTime } from 'luxon';

const seconds = (hhmm: string) => {
  const [h, m, s] = hhmm.split(':').map(Number) as [number, number, number | undefined];
  return h * 3600 + m * 60 + (s ?? 0);
};

/** 0 when `now` lies in [from, to) local time in `zone`; else the milliseconds until `from`. */
export function msUntilAllowed(now: Date, hours: { from: string; to: string }, zone: string): number {
  const local = DateTime.fromJSDate(now, { zone });
  const t = local.hour * 3600 + local.minute * 60 + local.second + local.millisecond / 1000;
  const [from, to] = [seconds(hours.from), seconds(hours.to)];
  const inside = from <= to ? t >= from && t < to : t >= from || t < to;
  if (inside) return 0;
  let next = local.startOf('day').plus({ seconds: from });
  if (next <= local) next = local.startOf('day').plus({ days: 1 }).plus({ seconds: from });
  return Math.max(0, next.toMillis() - local.toMillis());
}
