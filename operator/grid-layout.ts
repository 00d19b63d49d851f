// How the window grid is laid out: what a row, a column and a cell are for a job's grid (minutes
// by hour, hours by day, days by month, weeks or months by year), where a window falls in it, the
// columns' labels, and the cells with the state that most needs a person.
import { DateTime } from 'luxon';
import type { Job } from '../schedules/job.js';
import type { WindowState } from './window-state.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** One cell per window up to this many windows; sub-hourly grids beyond it get a cell per hour. */
export const MAX_WINDOW_CELLS = 3_000;

export type Layout = {
  /** What a row is, what a column is, what a cell holds. */
  rows: 'hour' | 'day' | 'month' | 'year';
  columns: 'minute' | 'hour' | 'day' | 'week' | 'month';
  cell: 'window' | 'hour';
};

export function layoutOf(job: Job, windows: number): Layout {
  const g = job.grid;
  if (g.kind === 'calendar')
    return g.unit === 'day'
      ? { rows: 'month', columns: 'day', cell: 'window' }
      : { rows: 'year', columns: g.unit, cell: 'window' };
  if (g.ms < HOUR_MS)
    return windows <= MAX_WINDOW_CELLS
      ? { rows: 'hour', columns: 'minute', cell: 'window' }
      : { rows: 'day', columns: 'hour', cell: 'hour' };
  if (g.ms < DAY_MS) return { rows: 'day', columns: 'hour', cell: 'window' };
  return { rows: 'month', columns: 'day', cell: 'window' };
}

/** Where a time falls in the layout: its row (keyed and labelled locally) and column. */
export function place(layout: Layout, t: Date, zone: string) {
  const d = DateTime.fromJSDate(t, { zone });
  switch (layout.rows) {
    case 'hour':
      // Keyed with the offset: a repeated hour (clocks going back) is a row of its own.
      return {
        row: d.toFormat('yyyy-MM-dd HH:00 ZZ'),
        label: d.toFormat('yyyy-MM-dd HH:00 (ZZ)'),
        col: d.minute,
      };
    case 'day':
      return { row: d.toISODate()!, label: d.toFormat('yyyy-MM-dd ccc'), col: d.hour };
    case 'month':
      return { row: d.toFormat('yyyy-MM'), label: d.toFormat('yyyy LLL'), col: d.day };
    default:
      return {
        row: layout.columns === 'week' ? String(d.weekYear) : String(d.year),
        label: layout.columns === 'week' ? String(d.weekYear) : String(d.year),
        col: layout.columns === 'week' ? d.weekNumber : d.month,
      };
  }
}

export function columnLabel(layout: Layout, col: number): string {
  if (layout.columns === 'minute') return `:${String(col).padStart(2, '0')}`;
  if (layout.columns === 'hour') return String(col).padStart(2, '0');
  if (layout.columns === 'week') return `W${String(col).padStart(2, '0')}`;
  if (layout.columns === 'month') return DateTime.fromObject({ month: col }).toFormat('LLL');
  return String(col);
}

/** Where a grid cell sits and the time it covers, in the job's zone and in UTC. */
interface CellSpan {
  col: number;
  start: string;
  end: string;
  startLocal: string;
  endLocal: string;
  local: string;
  utc: string;
  state: WindowState;
}

interface WindowCell extends CellSpan {
  kind: 'window';
  key: string;
  generation: number;
  attempts: number;
  durationMs: number | null;
  records: { in: number | null; applied: number | null; quarantined: number | null } | null;
  reason: string | null;
}

export interface HourCell extends CellSpan {
  kind: 'hour';
  /** The state that most needs a person among its windows. */
  state: WindowState;
  windows: number;
  states: Partial<Record<WindowState, number>>;
  reruns: number;
  attempts: number;
  durationMs: number;
  records: { in: number; applied: number; quarantined: number };
}

export type Cell = WindowCell | HourCell;

const URGENCY: readonly WindowState[] = [
  'failed',
  'missing',
  'running',
  'waiting',
  'not-closed',
  'done',
  'unscheduled',
];
export const worst = (states: Partial<Record<WindowState, number>>): WindowState =>
  URGENCY.find((s) => (states[s] ?? 0) > 0) ?? 'done';
