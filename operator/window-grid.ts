// A job's windows as a grid, like a partition view: time on one axis, days or hours on the
// other, each window coloured by where it stands. Shared by the page (and any other operator
// tool). The ledger is read with one range scan of its primary key; Temporal is asked once which
// of the job's windows run now. Times are labelled in the job's zone and in UTC.
import type { Client } from '@temporalio/client';
import type { Kysely, Transaction } from 'kysely';
import { DateTime } from 'luxon';
import { coveredBy, spansIn } from '../db/compaction.js';
import { readWatermark } from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import { msUntilAllowed } from '../schedules/hours.js';
import type { Job } from '../schedules/job.js';
import { isClosed, windowAt, windowsInRange, type Window } from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';

export const WINDOW_STATES = [
  'done',
  'failed',
  'running',
  'waiting',
  'not-closed',
  'missing',
  'unscheduled',
] as const;
/**
 * done / failed: the ledger's last generation of the window; running: its window run is open in
 * Temporal; waiting: open, but outside the job's allowed hours (the run sleeps until they open);
 * not-closed: its end (plus lateness) is still ahead; missing: closed, never done, nothing runs;
 * unscheduled: closed, but before the job's first window (never its to run).
 */
export type WindowState = (typeof WINDOW_STATES)[number];

const QUARTER_MS = 900_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
/** One cell per window up to this many windows; sub-hourly grids beyond it get a cell per hour. */
export const MAX_WINDOW_CELLS = 3_000;
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

/** A window's ledger row of one generation, as the grid and the detail read it. */
export interface LedgerRow {
  window_start: Date;
  generation: number;
  status: 'done' | 'failed';
  attempts: number;
  duration_ms: number | null;
  records_in: number | null;
  records_applied: number | null;
  records_quarantined: number | null;
  reason: string | null;
  workflow_id: string | null;
}

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

/** The job's window runs open in Temporal: key -> generation started (the ids are the window keys). */
export async function runningWindows(client: Client, job: string, cap = 1_000): Promise<Map<string, number>> {
  const running = new Map<string, number>();
  // By workflow id, not only the search attributes: a window presented by hand carries none.
  for await (const wf of client.workflow.list({
    query: `WorkflowType = "window" AND ExecutionStatus = "Running" AND WorkflowId STARTS_WITH "${job}/"`,
  })) {
    const m = /^(.+?)(?:#(\d+))?$/.exec(wf.workflowId);
    if (m) running.set(m[1]!, Math.max(running.get(m[1]!) ?? 0, Number(m[2] ?? 0)));
    if (running.size >= cap) break;
  }
  return running;
}

/**
 * The running window runs (of `running`, starting in [from, to)) still in their wait for the job's
 * allowed hours: nothing but the hours check scheduled in their history yet. A run that began in
 * its hours and works on after they closed is running, not waiting. At most `cap` are asked.
 */
export async function waitingForHours(
  client: Client,
  job: string,
  running: ReadonlyMap<string, number>,
  range: { from: Date; to: Date },
  cap = 50,
): Promise<Set<string>> {
  const inRange = [...running].filter(([key]) => {
    const start = new Date(key.slice(job.length + 1)).getTime();
    return start >= range.from.getTime() && start < range.to.getTime();
  });
  const waiting = new Set<string>();
  await Promise.all(
    inRange.slice(0, cap).map(async ([key, generation]) => {
      const workflowId = generation ? `${key}#${generation}` : key;
      const history = await client.workflow.getHandle(workflowId).fetchHistory();
      const started = (history.events ?? []).some((e) => {
        const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
        return name && name !== 'msUntilAllowed';
      });
      if (!started) waiting.add(key);
    }),
  );
  return waiting;
}

export interface WindowStateInput {
  /** Every generation's ledger row of the window, any order. */
  rows: readonly LedgerRow[];
  /** The generation whose run is open in Temporal, if one is. */
  running: number | undefined;
  closed: boolean;
  /** Before the job's first window (see firstWindowOf). */
  beforeFirst: boolean;
  /** Its run waits for the job's allowed hours (see waitingForHours). */
  waitingForHours: boolean;
}

/** Where one window stands (see WindowState) and the generation that says so. */
export function windowState(i: WindowStateInput): { state: WindowState; generation: number } {
  const last = i.rows.reduce<LedgerRow | undefined>(
    (a, r) => (!a || r.generation > a.generation ? r : a),
    undefined,
  );
  const generation = Math.max(last?.generation ?? 0, i.running ?? 0);
  // A run open now says more than an earlier attempt's row: a failed window being retried runs.
  if (i.running !== undefined && !(last?.status === 'done' && last.generation >= i.running))
    return { state: i.waitingForHours ? 'waiting' : 'running', generation };
  if (last) return { state: last.status, generation };
  return { state: !i.closed ? 'not-closed' : i.beforeFirst ? 'unscheduled' : 'missing', generation };
}

type Layout = {
  /** What a row is, what a column is, what a cell holds. */
  rows: 'hour' | 'day' | 'month' | 'year';
  columns: 'minute' | 'hour' | 'day' | 'week' | 'month';
  cell: 'window' | 'hour';
};

function layoutOf(job: Job, windows: number): Layout {
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

/** The default range, ending with the window that holds `now`: a day of sub-hourly cells per hour, a week of hours, ~3 months of days. */
function defaultSpan(job: Job): number {
  const g = job.grid;
  if (g.kind === 'calendar')
    return g.unit === 'day' ? 92 * DAY_MS : g.unit === 'week' ? 364 * DAY_MS : 730 * DAY_MS;
  if (g.ms < DAY_MS) return 7 * DAY_MS;
  return 92 * DAY_MS;
}

/** Where a time falls in the layout: its row (keyed and labelled locally) and column. */
function place(layout: Layout, t: Date, zone: string) {
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

function columnLabel(layout: Layout, col: number): string {
  if (layout.columns === 'minute') return `:${String(col).padStart(2, '0')}`;
  if (layout.columns === 'hour') return String(col).padStart(2, '0');
  if (layout.columns === 'week') return `W${String(col).padStart(2, '0')}`;
  if (layout.columns === 'month') return DateTime.fromObject({ month: col }).toFormat('LLL');
  return String(col);
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

/** The row of a window whose marker was compacted: done at generation 0, its counts no longer kept. */
export function compactedRow(start: Date): LedgerRow {
  return {
    window_start: start,
    generation: 0,
    status: 'done',
    attempts: 1,
    duration_ms: null,
    records_in: null,
    records_applied: null,
    records_quarantined: null,
    reason: null,
    workflow_id: null,
  };
}

/** Every generation's ledger row of the job's windows starting in [from, to): one range scan of the primary key. */
export function ledgerRows(db: Kysely<Database> | Transaction<Database>, job: string, from: Date, to: Date) {
  return db
    .selectFrom('job_windows')
    .select([
      'window_start',
      'generation',
      'status',
      'attempts',
      'duration_ms',
      'records_in',
      'records_applied',
      'records_quarantined',
      'reason',
      'workflow_id',
    ])
    .where('job', '=', job)
    .where('window_start', '>=', from)
    .where('window_start', '<', to);
}

/**
 * The start of the job's first window: its declared start, else the earliest it has in the ledger
 * or its watermark (where its first tick began), whichever is earlier; undefined when no tick has
 * seen the job yet. Two primary-key lookups.
 */
export async function firstWindowOf(db: Kysely<Database>, job: Job): Promise<Date | undefined> {
  if (job.start) return job.start;
  const [ledger, span, watermark] = await Promise.all([
    db
      .selectFrom('job_windows')
      .select('window_start')
      .where('job', '=', job.name)
      .orderBy('window_start')
      .limit(1)
      .executeTakeFirst(),
    db
      .selectFrom('job_done_spans')
      .select('span_start')
      .where('job', '=', job.name)
      .orderBy('span_start')
      .limit(1)
      .executeTakeFirst(),
    readWatermark(db, job.name),
  ]);
  const starts = [ledger?.window_start, span?.span_start, watermark].filter(
    (t): t is Date => t !== undefined,
  );
  return starts.length ? new Date(Math.min(...starts.map((t) => t.getTime()))) : undefined;
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

interface HourCell extends CellSpan {
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

type Cell = WindowCell | HourCell;

const URGENCY: readonly WindowState[] = [
  'failed',
  'missing',
  'running',
  'waiting',
  'not-closed',
  'done',
  'unscheduled',
];
const worst = (states: Partial<Record<WindowState, number>>): WindowState =>
  URGENCY.find((s) => (states[s] ?? 0) > 0) ?? 'done';

export type WindowGrid = Awaited<ReturnType<typeof windowGrid>>;
