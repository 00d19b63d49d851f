// Where a window stands: done or failed in the ledger, running or waiting for its allowed hours in
// Temporal, not closed yet, missing, or before the job's first window. Temporal is asked once which
// of the job's windows run now, and which of those still wait for their hours.
import type { Client } from '@temporalio/client';
import type { LedgerRow } from './window-ledger.js';

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
