// Backfills for the page (and any other interface): a dry-run preview of a range before it starts,
// and the progress of running and recent backfills, read from Temporal (the backfill workflow's
// `progress` query while it runs, its result once it completes).
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { DateTime } from 'luxon';
import type { Kysely } from 'kysely';
import { parseWhen } from './dates.js';
import { doneWindows } from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import type { Catalog, Job } from '../schedules/job.js';
import { isClosed, windowsInRange, type Window } from '../schedules/windows.js';
import { isoUtc } from '../contract/window-key.js';
import { SA_JOB, SA_KIND } from '../contract/search-attributes.js';
import type { BackfillProgress, BackfillResult } from '../contract/workflows.js';

/** A preview counts windows up to here; a larger range is "more than" (and over any sane limit). */
export const PREVIEW_CAP = 100_000;

export interface WindowTimes {
  start: string;
  end: string;
  /** The same instants in the job's zone. */
  startLocal: string;
  endLocal: string;
}

export interface BackfillPreview {
  job: string;
  timezone: string;
  /** How from and to were read: in the job's zone or in UTC (an explicit offset always wins). */
  inputZone: string;
  from: string;
  to: string;
  windows: number;
  /** Counting stopped at PREVIEW_CAP. */
  capped: boolean;
  first: WindowTimes | null;
  last: WindowTimes | null;
  /** Done already: the backfill skips them (it plans only windows without a done marker). */
  alreadyDone: number;
  /** Not closed yet: the backfill leaves them out; the job's ticks process them once they close. */
  notClosed: number;
  toProcess: number;
  limit: number;
  overLimit: boolean;
}

export class BackfillInputError extends Error {
  readonly code = 'BAD_BACKFILL_INPUT';
}

const local = (t: Date, zone: string) =>
  DateTime.fromJSDate(t, { zone }).toFormat("yyyy-MM-dd'T'HH:mm:ss ZZ") + ` ${zone}`;
const times = (w: Window, zone: string): WindowTimes => ({
  start: isoUtc(w.start),
  end: isoUtc(w.end),
  startLocal: local(w.start, zone),
  endLocal: local(w.end, zone),
});

/** Reads from/to as the page sends them: `zone` "job" (the job's time zone) or "utc". */
export function readRange(
  job: Job,
  input: { from?: string; to?: string; zone?: string },
): { from: Date; to: Date } {
  const zoneName = input.zone ?? 'job';
  if (zoneName !== 'job' && zoneName !== 'utc')
    throw new BackfillInputError(`zone: "${zoneName}" is neither "job" (${job.timezone}) nor "utc"`);
  const zone = zoneName === 'job' ? job.timezone : 'UTC';
  const read = (field: 'from' | 'to') => {
    const text = (input[field] ?? '').trim();
    if (!text)
      throw new BackfillInputError(`${field}: missing; send a date and time such as 2026-05-20T00:00`);
    try {
      return parseWhen(field, text, zone);
    } catch (err) {
      throw new BackfillInputError((err as Error).message);
    }
  };
  const from = read('from');
  const to = read('to');
  if (!(from < to)) throw new BackfillInputError(`to: ${isoUtc(to)} must be after from (${isoUtc(from)})`);
  return { from, to };
}

/** What a backfill of [from, to) would do, without starting anything. */
export async function previewBackfill(
  db: Kysely<Database>,
  job: Job,
  input: { from?: string; to?: string; zone?: string },
  o: { now: Date; limit: number },
): Promise<BackfillPreview> {
  const { from, to } = readRange(job, input);
  const windows = windowsInRange(job.grid, job.timezone, from, to, PREVIEW_CAP + 1);
  const capped = windows.length > PREVIEW_CAP;
  const counted = windows.slice(0, PREVIEW_CAP);
  const first = counted[0];
  const last = counted.at(-1);
  const done = await doneWindows(db, job.name, counted);
  const notClosed = counted.filter((w) => !isClosed(w, o.now, job.latenessMs)).length;
  return {
    job: job.name,
    timezone: job.timezone,
    inputZone: input.zone === 'utc' ? 'UTC' : job.timezone,
    from: isoUtc(from),
    to: isoUtc(to),
    windows: counted.length,
    capped,
    first: first ? times(first, job.timezone) : null,
    last: last ? times(last, job.timezone) : null,
    alreadyDone: done.size,
    notClosed,
    toProcess: Math.max(0, counted.length - done.size - notClosed),
    limit: o.limit,
    overLimit: capped || counted.length > o.limit,
  };
}

export interface BackfillRow {
  workflowId: string;
  job: string;
  from: string;
  to: string;
  /** Temporal's status: Running, Completed, Failed, Terminated, Canceled, TimedOut. */
  status: string;
  /** A failed window, or an ended run that did not complete, is a failure. */
  outcome: 'running' | 'completed' | 'failed';
  startedAt: string;
  closedAt: string | null;
  /** Windows in the range (counting stops at PREVIEW_CAP). */
  windows: number;
  counts: { done: number; alreadyDone: number; failed: number; running: number; pending: number } | null;
  failedWindows: string[];
  note: string | null;
}

/** The range a backfill's workflow id names: `<job>/backfill-<from>-<to>` (page and CLI alike). */
export function rangeOfId(workflowId: string): { from: string; to: string } | null {
  const m = /\/backfill-(.+?Z)-(.+Z)$/.exec(workflowId);
  return m ? { from: m[1]!, to: m[2]! } : null;
}

async function rowOf(
  client: Client,
  catalog: Catalog,
  w: WorkflowExecutionInfo,
  now: Date,
): Promise<BackfillRow | null> {
  const job = w.typedSearchAttributes.get(SA_JOB) ?? w.workflowId.split('/')[0]!;
  const range = rangeOfId(w.workflowId);
  if (!range || !catalog.jobs.some((j) => j.name === job)) return null;
  const spec = catalog.get(job);
  // The backfill takes only windows closed when it plans them: the bar counts those, so that
  // windows still open are not shown as pending for ever.
  const inRange = windowsInRange(
    spec.grid,
    spec.timezone,
    new Date(range.from),
    new Date(range.to),
    PREVIEW_CAP,
  );
  const windows = inRange.filter((x) => isClosed(x, w.closeTime ?? now, spec.latenessMs)).length;
  const open = inRange.length - windows;
  const status = w.status.name;
  const base = {
    workflowId: w.workflowId,
    job,
    ...range,
    status:
      status.charAt(0) +
      status
        .slice(1)
        .toLowerCase()
        .replace(/_(.)/g, (_, c: string) => c.toUpperCase()),
    startedAt: isoUtc(w.startTime),
    closedAt: w.closeTime ? isoUtc(w.closeTime) : null,
    windows,
  };
  const handle = client.workflow.getHandle(w.workflowId, w.runId);
  const totals = (t: {
    processed: number;
    alreadyDone: number;
    running: number;
    failed: string[];
    inFlight?: number;
  }) => {
    const running = t.running + (t.inFlight ?? 0);
    const settled = t.processed + t.alreadyDone + t.failed.length + running;
    return {
      done: t.processed + t.alreadyDone,
      alreadyDone: t.alreadyDone,
      failed: t.failed.length,
      running,
      pending: Math.max(0, windows - settled),
    };
  };
  if (status === 'RUNNING') {
    const p = await handle.query<BackfillProgress>('progress').catch(() => null);
    return {
      ...base,
      outcome: p && p.failed.length ? 'failed' : 'running',
      counts: p ? totals(p) : null,
      failedWindows: p ? p.failed : [],
      note: p
        ? open
          ? `${open} windows of the range are not closed yet and are left out`
          : null
        : 'progress not available (no worker answered its query)',
    };
  }
  if (status === 'COMPLETED') {
    const r = (await handle.result()) as BackfillResult;
    const counts = totals(r);
    return {
      ...base,
      outcome: r.failed.length ? 'failed' : 'completed',
      counts,
      failedWindows: r.failed,
      note: open ? `${open} windows of the range were not closed when it ran and were left out` : null,
    };
  }
  return {
    ...base,
    outcome: 'failed',
    counts: null,
    failedWindows: [],
    note: `the backfill's workflow ended ${base.status.toLowerCase()}: see it in the Temporal Web UI`,
  };
}

/** Running backfills first, then the most recent; a run that continued as new shows as its latest run. */
export async function listBackfills(
  client: Client,
  catalog: Catalog,
  now: Date,
  limit = 20,
): Promise<BackfillRow[]> {
  const rows: BackfillRow[] = [];
  for await (const w of client.workflow.list({
    query: `${SA_KIND.name} = "backfill" AND ExecutionStatus != "ContinuedAsNew"`,
  })) {
    const row = await rowOf(client, catalog, w, now);
    if (row) rows.push(row);
    if (rows.length >= limit) break;
  }
  return rows.sort(
    (a, b) =>
      Number(b.status === 'Running') - Number(a.status === 'Running') ||
      b.startedAt.localeCompare(a.startedAt),
  );
}
