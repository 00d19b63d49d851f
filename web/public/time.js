// Instants as the page shows them: in the job's time zone AND in UTC, never one without the other.
const formats = new Map();
function format(zone, seconds) {
  const id = `${zone} ${seconds}`;
  if (!formats.has(id))
    formats.set(
      id,
      new Intl.DateTimeFormat('en-CA', {
        timeZone: zone,
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        ...(seconds ? { second: '2-digit' } : {}),
        hourCycle: 'h23',
        timeZoneName: 'short',
      }),
    );
  return formats.get(id);
}

/** "2026-05-20 02:00 GMT+2" in `zone`; with `seconds`, "2026-05-20 02:00:07 GMT+2". */
export function inZone(iso, zone, seconds = false) {
  const parts = Object.fromEntries(
    format(zone, seconds)
      .formatToParts(new Date(iso))
      .map((p) => [p.type, p.value]),
  );
  const time = seconds ? `${parts.hour}:${parts.minute}:${parts.second}` : `${parts.hour}:${parts.minute}`;
  return `${parts.year}-${parts.month}-${parts.day} ${time} ${parts.timeZoneName}`;
}

/** The UTC form: "2026-05-20 00:00 UTC". */
export const utc = (iso) => `${new Date(iso).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/** [job zone, UTC] for one instant; a UTC job shows it once. */
export function both(iso, zone) {
  if (!iso) return ['-', ''];
  return zone === 'UTC' || zone === 'Etc/UTC' ? [utc(iso), ''] : [inZone(iso, zone), utc(iso)];
}

/** "3 min ago", "in 2 h": the distance from now, coarse; "just now" within a second. */
export function ago(iso, now = Date.now()) {
  const s = Math.round((new Date(iso).getTime() - now) / 1000);
  const a = Math.abs(s);
  if (a === 0) return 'just now';
  const text =
    a < 60
      ? `${a} s`
      : a < 3600
        ? `${Math.round(a / 60)} min`
        : a < 172800
          ? `${Math.round(a / 3600)} h`
          : `${Math.round(a / 86400)} d`;
  return s < 0 ? `${text} ago` : `in ${text}`;
}

/** 1234 -> "1.2 s". */
export function duration(ms) {
  if (ms === null || ms === undefined) return '-';
  return ms < 1000
    ? `${ms} ms`
    : ms < 60_000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${(ms / 60_000).toFixed(1)} min`;
}
