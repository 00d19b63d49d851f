// Date arguments: ISO-8601 instants, or plain dates and local times read in the job's time zone.
import { DateTime } from 'luxon';

export class DateArgumentError extends Error {
  constructor(
    readonly argument: string,
    text: string,
  ) {
    super(
      `${argument}: "${text}" is not a date; use 2026-03-01, 2026-03-01T10:00 (job's time zone) or 2026-03-01T10:00:00Z`,
    );
    this.name = 'DateArgumentError';
  }
}

export function parseWhen(argument: string, text: string, zone: string): Date {
  const hasOffset = /(Z|[+-]\d\d:?\d\d)$/i.test(text);
  const dt = DateTime.fromISO(text, hasOffset ? { setZone: true } : { zone });
  if (!dt.isValid) throw new DateArgumentError(argument, text);
  return dt.toJSDate();
}
