// A job's windows as a grid, like a partition view: time on one axis, days or hours on the
// other, each window coloured by where it stands. Shared by the page (and any other operator
// tool). The ledger is read with one range scan of its primary key; Temporal is asked once which
// of the job's windows run now. Times are labelled in the job's zone and in UTC.
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import { DateTime } from 'luxon';
import { coveredBy, spansIn } from '../db/compaction.js';
import type { Database } from '../db/schema.js';
import { msUntilAllowed } from '../schedules/hours.js';
import type { Job } from '../schedules/job.js';
import { isClosed, windowAt, windowsInRange } from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import {
  columnLabel,
  layoutOf,
  MAX_WINDOW_CELLS,
  place,
  worst,
  type Cell,
  type HourCell,
} from './grid-layout.js';
import { windowLabels } from './window-labels.js';
import { compactedRow, firstWindowOf, ledgerRows, type LedgerRow } from './window-ledger.js';
import {
  runningWindows,
  waitingForHours,
  WINDOW_STATES,
  windowState,
  type WindowState,
} from './window-state.js';

const QUARTER_MS = 900_000;
const DAY_MS = 86_400_000;
/** Ranges with more windows are refused: a minutely job over a month is 43,200. */
export const MAX_GRID_WINDOWS = 50_000;

export class GridRangeError extends Error {
  readonly code = 'GRID_RANGE';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** The default range, ending with the window that holds `now`: a day of sub-hourly cells per hour, a week of hours, ~3 months of days. */
function defaultSpan(job: Job): number {
  const g = job.grid;
  if (g.kind === 'calendar')
    return g.unit === 'day' ? 92 * DAY_MS : g.unit === 'week' ? 364 * DAY_MS : 730 * DAY_MS;
  if (g.ms < DAY_MS) return 7 * DAY_MS;
  return 92 * DAY_MS;
}

function parseInstant(field: string, text: unknown): Date | undefined {
  if (text === undefined || text === '') return undefined;
  if (typeof text !== 'string') throw new GridRangeError(field, 'given more than once; send it once');
  const t = new Date(text);
  if (Number.isNaN(t.getTime()) || !/^\d{4}-\d{2}-\d{2}/.test(text))
    throw new GridRangeError(
      field,
      `${JSON.stringify(text.slice(0, 60))} is not an instant; send ISO-8601 such as 2026-03-29T00:00:00Z`,
    );
  return t;
}

export interface GridOptions {
  db: Kysely<Database>;
  client: Client;
  job: Job;
  now: Date;
  /** ISO-8601 instants as the page sends them; either may be left out. */
  from?: string;
  to?: string;
}

/** The job's windows starting in [from, to), laid out in rows and columns, with per-state totals. */
export async function windowGrid(o: GridOptions) {
  const { job, now } = o;
  const zone = job.timezone;
  let from = parseInstant('from', o.from);
  let to = parseInstant('to', o.to);
  if (from && to && !(from < to))
    throw new GridRangeError('from', `${isoUtc(from)} is not before to (${isoUtc(to)}); send from < to`);
  // Default: the span before (and including) the window that holds now, or after `from`.
  to ??= from ? new Date(from.getTime() + defaultSpan(job)) : windowAt(job.grid, zone, now).end;
  from ??= new Date(to.getTime() - defaultSpan(job));
  // Windows before the job's declared start were never its to run: not shown as missing.
  if (job.start && from < job.start) from = job.start < to ? job.start : to;
  const windows = windowsInRange(job.grid, zone, from, to, MAX_GRID_WINDOWS + 1);
  if (windows.length > MAX_GRID_WINDOWS)
    throw new GridRangeError(
      'from',
      `${isoUtc(from)} to ${isoUtc(to)} holds more than ${MAX_GRID_WINDOWS} windows of ${job.name} (grid ${job.grid.label}); narrow the range`,
    );
  const layout = layoutOf(job, windows.length);
  if (layout.cell === 'window' && windows.length > MAX_WINDOW_CELLS)
    throw new GridRangeError(
      'from',
      `${isoUtc(from)} to ${isoUtc(to)} holds ${windows.length} windows of ${job.name}; at most ${MAX_WINDOW_CELLS} fit a grid of grid ${job.grid.label}: narrow the range`,
    );

  const rows: LedgerRow[] =
    windows.length === 0
      ? []
      : await ledgerRows(o.db, job.name, windows[0]!.start, windows.at(-1)!.end).execute();
  // Windows whose markers were folded into a span (db/compaction.ts): done at generation 0.
  const doneSpans = windows.length
    ? await spansIn(o.db, job.name, windows[0]!.start, windows.at(-1)!.end)
    : [];
  if (doneSpans.length) {
    const marked = new Set(rows.map((r) => r.window_start.getTime()));
    for (const w of windows)
      if (!marked.has(w.start.getTime()) && coveredBy(doneSpans, job.name, w))
        rows.push(compactedRow(w.start));
  }
  const first = await firstWindowOf(o.db, job);
  const byStart = new Map<number, LedgerRow[]>();
  for (const r of rows) {
    const list = byStart.get(r.window_start.getTime()) ?? [];
    list.push(r);
    byStart.set(r.window_start.getTime(), list);
  }
  const notes: string[] = [];
  let running = new Map<string, number>();
  try {
    running = await runningWindows(o.client, job.name);
  } catch (err) {
    notes.push(
      `Temporal could not say which windows run now (${(err as Error).message}): none is shown running`,
    );
  }
  let waiting = new Set<string>();
  if (job.allowedHours && msUntilAllowed(now, job.allowedHours, zone) > 0)
    waiting = await waitingForHours(o.client, job.name, running, { from, to }).catch((err: Error) => {
      notes.push(`Temporal could not say which runs wait for the allowed hours (${err.message})`);
      return new Set<string>();
    });

  const totals = Object.fromEntries(WINDOW_STATES.map((s) => [s, 0])) as Record<WindowState, number>;
  let reruns = 0;
  const rowsOut = new Map<string, { key: string; label: string; cells: Cell[] }>();
  const columns = new Set<number>();
  const hourCells = new Map<string, HourCell>();
  // In hour cells, a window's place is the same for every start in one UTC quarter hour (every zone's
  // offset is a whole number of quarter hours): placed once per quarter, not per window.
  let placed: { block: number; at: ReturnType<typeof place>; hourKey: string } | undefined;
  const spans = new Map<HourCell, { start: Date; end: Date }>();
  for (const w of windows) {
    const key = windowKey(job.name, w.start);
    const ledger = byStart.get(w.start.getTime()) ?? [];
    const { state, generation } = windowState({
      rows: ledger,
      running: running.get(key),
      closed: isClosed(w, now, job.latenessMs),
      beforeFirst: first === undefined || w.start < first,
      waitingForHours: waiting.has(key),
    });
    totals[state]++;
    if (generation > 0) reruns++;
    const last = ledger.find((r) => r.generation === generation);
    const block = layout.cell === 'hour' ? Math.floor(w.start.getTime() / QUARTER_MS) : NaN;
    if (placed?.block !== block) {
      const at = place(layout, w.start, zone);
      // The offset is kept in the key: a repeated hour (clocks going back) is two cells.
      placed = {
        block,
        at,
        hourKey: `${at.row} ${at.col} ${DateTime.fromJSDate(w.start, { zone }).toFormat('ZZ')}`,
      };
    }
    const p = placed.at;
    columns.add(p.col);
    let row = rowsOut.get(p.row);
    if (!row) rowsOut.set(p.row, (row = { key: p.row, label: p.label, cells: [] }));
    if (layout.cell === 'window') {
      row.cells.push({
        kind: 'window',
        col: p.col,
        key,
        ...windowLabels(w, zone),
        state,
        generation,
        attempts: last?.attempts ?? 0,
        durationMs: last?.duration_ms ?? null,
        records: last
          ? { in: last.records_in, applied: last.records_applied, quarantined: last.records_quarantined }
          : null,
        reason: last?.status === 'failed' ? last.reason : null,
      });
      continue;
    }
    // Sub-hourly grids over days: one cell per local hour, labelled once its last window is known.
    let cell = hourCells.get(placed.hourKey);
    if (!cell) {
      cell = {
        kind: 'hour',
        col: p.col,
        start: '',
        end: '',
        startLocal: '',
        endLocal: '',
        local: '',
        utc: '',
        state,
        windows: 0,
        states: {},
        reruns: 0,
        attempts: 0,
        durationMs: 0,
        records: { in: 0, applied: 0, quarantined: 0 },
      };
      hourCells.set(placed.hourKey, cell);
      spans.set(cell, { start: w.start, end: w.end });
      row.cells.push(cell);
    }
    spans.get(cell)!.end = w.end;
    cell.windows++;
    cell.states[state] = (cell.states[state] ?? 0) + 1;
    if (generation > 0) cell.reruns++;
    cell.attempts += last?.attempts ?? 0;
    cell.durationMs += last?.duration_ms ?? 0;
    cell.records.in += last?.records_in ?? 0;
    cell.records.applied += last?.records_applied ?? 0;
    cell.records.quarantined += last?.records_quarantined ?? 0;
  }
  for (const [cell, span] of spans)
    Object.assign(cell, windowLabels(span, zone), { state: worst(cell.states) });
  return {
    job: job.name,
    grid: job.grid.label,
    timezone: zone,
    allowedHours: job.allowedHours ?? null,
    now: isoUtc(now),
    from: isoUtc(from),
    to: isoUtc(to),
    windows: windows.length,
    layout,
    columns: [...columns].sort((a, b) => a - b).map((c) => ({ col: c, label: columnLabel(layout, c) })),
    rows: [...rowsOut.values()],
    totals: { ...totals, reruns },
    notes,
  };
}

export type WindowGrid = Awaited<ReturnType<typeof windowGrid>>;
