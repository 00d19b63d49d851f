// Instants as operators read them: in the job's zone and in UTC, e.g. "2026-08-01 02:00 CEST (00:00 UTC)".
const parts = (iso, timeZone) =>
  Object.fromEntries(
    new Intl.DateTimeFormat('en-GB', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
      timeZoneName: 'short',
    })
      .formatToParts(new Date(iso))
      .map((p) => [p.type, p.value]),
  );

export function inZoneAndUtc(iso, timeZone) {
  if (!iso) return '-';
  const u = parts(iso, 'UTC');
  const utc = `${u.year}-${u.month}-${u.day} ${u.hour}:${u.minute} UTC`;
  if (!timeZone || timeZone === 'UTC') return utc;
  const l = parts(iso, timeZone);
  const sameDay = l.year === u.year && l.month === u.month && l.day === u.day;
  return `${l.year}-${l.month}-${l.day} ${l.hour}:${l.minute} ${l.timeZoneName} (${sameDay ? `${u.hour}:${u.minute} UTC` : utc})`;
}

/** Adds a view's own stylesheet once (a <link>, so the page's CSP style-src 'self' allows it). */
export function useStyles(href) {
  if (document.querySelector(`link[href="${href}"]`)) return;
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = href;
  document.head.append(link);
}
