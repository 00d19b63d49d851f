// A window's time as people read it: in the job's zone and in UTC, and as ISO instants.
import { DateTime } from 'luxon';
import type { Window } from '../schedules/windows.js';
import { isoUtc } from '../contract/window-key.js';

/** The window [start, end) in the job's zone and in UTC, as people read it, and as ISO instants. */
export function windowLabels(w: Window, zone: string) {
  const s = DateTime.fromJSDate(w.start, { zone });
  const e = DateTime.fromJSDate(w.end, { zone });
  const endText = (a: DateTime, b: DateTime) =>
    a.toISODate() === b.toISODate() ? b.toFormat('HH:mm') : b.toFormat('yyyy-MM-dd HH:mm');
  const [offS, offE] = [s.toFormat('ZZ'), e.toFormat('ZZ')];
  const local =
    offS === offE
      ? `${s.toFormat('yyyy-MM-dd HH:mm')} – ${endText(s, e)} ${zone} (UTC${offS})`
      : `${s.toFormat('yyyy-MM-dd HH:mm')} (UTC${offS}) – ${endText(s, e)} (UTC${offE}) ${zone}`;
  const [su, eu] = [s.setZone('UTC'), e.setZone('UTC')];
  return {
    start: isoUtc(w.start),
    end: isoUtc(w.end),
    startLocal: s.toISO({ suppressMilliseconds: true })!,
    endLocal: e.toISO({ suppressMilliseconds: true })!,
    local,
    utc: `${su.toFormat('yyyy-MM-dd HH:mm')} – ${endText(su, eu)} UTC`,
  };
}
