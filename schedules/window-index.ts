// A window's position on its grid, counted from the window that contains the UTC epoch: a
// cadence such as "every Nth window" is then the same whichever window a process starts from.
import { DateTime } from 'luxon';
import type { Grid } from './windows.js';

/** The number of windows between the epoch's window and the one starting at `start` (aligned). */
export function windowIndex(grid: Grid, zone: string, start: Date): number {
  if (grid.kind === 'fixed') return Math.floor(start.getTime() / grid.ms);
  // Calendar grids count local dates, so a 23- or 25-hour DST day is still one window.
  const local = DateTime.fromJSDate(start, { zone });
  const days = Date.UTC(local.year, local.month - 1, local.day) / 86_400_000;
  switch (grid.unit) {
    case 'day':
      return days;
    case 'week':
      // ISO weeks start on Monday; 1970-01-01 was a Thursday, three days after one.
      return Math.floor((days + 3) / 7);
    case 'month':
      return (local.year - 1970) * 12 + local.month - 1;
    default: {
      const never: never = grid.unit;
      throw new Error(`unknown calendar unit ${String(never)}`);
    }
  }
}
