// backfill: every closed window of a range; the dry run says what would happen to each window,
// the real one shows progress (a bar on a terminal, plain lines otherwise) and a summary.
import { doneWindows } from '../../db/ledger.js';
import { formatDuration } from '../../schedules/duration.js';
import type { Job } from '../../schedules/job.js';
import { isClosed, windowsInRange, type Window } from '../../schedules/windows.js';
import { isoUtc, windowKey } from '../../contract/window-key.js';
import { searchAttributes } from '../../contract/search-attributes.js';
import {
  MAX_BATCH,
  MAX_CONCURRENCY,
  type BackfillProgress,
  type BackfillResult,
} from '../../contract/workflows.js';
import type { Command } from '../command.js';
import { positiveInt, table, UsageError } from '../context.js';
import { parseWhen } from '../../operator/dates.js';
import { noWorkerNote } from '../pollers.js';
import { askEvery, boundedCall } from '../progress.js';

/** Every window of the range is still open: nothing to do until the first one closes. */
export class WindowsNotClosed extends Error {
  readonly code = 'WINDOWS_NOT_CLOSED';
}

function bar(done: number, total: number, width = 30): string {
  const filled = total > 0 ? Math.round((done / total) * width) : width;
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
}

/** When a window may be processed: its end plus the job's lateness. */
const processableFrom = (job: Job, w: Window) => new Date(w.end.getTime() + job.latenessMs);

/** What a backfill says about the windows of its range that have not closed yet. */
function openWindowsNote(job: Job, open: Window[], total: number): string {
  const first = open[0]!;
  const last = open.at(-1)!;
  const lateness = job.latenessMs
    ? ` (its end plus the job's lateness of ${formatDuration(job.latenessMs)})`
    : '';
  const when = `${windowKey(job.name, first.start)} may be processed from ${isoUtc(processableFrom(job, first))}${lateness}${
    open.length > 1
      ? `, the last, ${windowKey(job.name, last.start)}, from ${isoUtc(processableFrom(job, last))}`
      : ''
  }`;
  return open.length === total
    ? `none of the ${total} windows of ${job.name} in this range has closed yet: ${when}; run the backfill after that, or move --from and --to earlier`
    : `${open.length} of ${total} windows are not closed yet and are left out: ${when}; the job's scheduled ticks process them once they close`;
}

export const backfillCommand: Command = {
  name: 'backfill',
  summary: 'process every closed window whose start lies in [from, to); windows already done are skipped',
  usage: [
    'backfill <job> --from DATE --to DATE [--concurrency N] [--batch N] [--dry-run] [--no-wait] [--json]',
  ],
  options: {
    from: { type: 'string' },
    to: { type: 'string' },
    concurrency: { type: 'string' },
    batch: { type: 'string' },
    'dry-run': { type: 'boolean' },
    'no-wait': { type: 'boolean' },
  },
  async run(ctx, { positionals, values }) {
    const job = ctx.job(positionals[0], 'backfill');
    if (!values.from || !values.to) throw new UsageError('backfill: --from and --to are required');
    const from = parseWhen('--from', values.from as string, job.timezone);
    const to = parseWhen('--to', values.to as string, job.timezone);
    if (!(from < to))
      throw new UsageError(`backfill: --from (${isoUtc(from)}) must be before --to (${isoUtc(to)})`);
    const concurrency = positiveInt('concurrency', values.concurrency as string | undefined, 8);
    if (concurrency > MAX_CONCURRENCY)
      throw new UsageError(
        `--concurrency: "${String(values.concurrency)}" is more than ${MAX_CONCURRENCY} windows at once`,
      );
    // N consecutive windows per activity, each still its own transaction with its own done marker.
    const batchText = values.batch as string | undefined;
    const batch = batchText === undefined ? undefined : positiveInt('batch', batchText, 1);
    if (batch !== undefined && batch > MAX_BATCH)
      throw new UsageError(`--batch: "${batchText}" is more than ${MAX_BATCH} windows per batch`);
    const windows = windowsInRange(job.grid, job.timezone, from, to, 100_000);
    if (!windows.length)
      throw new UsageError(
        `backfill: no window of ${job.name} (grid "${job.grid.label}" in ${job.timezone}) starts in [${isoUtc(from)}, ${isoUtc(to)}); widen --from and --to`,
      );
    const now = new Date();
    const open = windows.filter((w) => !isClosed(w, now, job.latenessMs));

    if (values['dry-run']) {
      const done = await doneWindows(await ctx.db(), job.name, windows);
      const plan = windows.map((w) => ({
        window: windowKey(job.name, w.start),
        start: isoUtc(w.start),
        end: isoUtc(w.end),
        action: done.has(w.start.getTime())
          ? 'skip: already done'
          : isClosed(w, now, job.latenessMs)
            ? 'process'
            : 'skip: not closed yet',
        processableFrom: isoUtc(processableFrom(job, w)),
      }));
      const count = (a: string) => plan.filter((p) => p.action === a).length;
      return {
        json: { job: job.name, from: isoUtc(from), to: isoUtc(to), windows: plan },
        lines: [
          ...table(
            ['WINDOW', 'END', 'WOULD'],
            plan.map((p) => [p.window, p.end, p.action]),
          ),
          `dry run: ${count('process')} to process, ${count('skip: already done')} already done, ${count('skip: not closed yet')} not closed yet`,
          ...(open.length ? [openWindowsNote(job, open, windows.length)] : []),
        ],
      };
    }

    // Refused before any workflow starts: a backfill of open windows would only wait or fail.
    if (open.length === windows.length)
      throw new WindowsNotClosed(`backfill: ${openWindowsNote(job, open, windows.length)}`);
    const closed = windows.length - open.length;
    const note = open.length ? openWindowsNote(job, open, windows.length) : undefined;
    const notClosedYet = note
      ? {
          count: open.length,
          first: windowKey(job.name, open[0]!.start),
          processableFrom: isoUtc(processableFrom(job, open[0]!)),
        }
      : undefined;
    const client = await ctx.client();
    const workflowId = `${job.name}/backfill-${isoUtc(from)}-${isoUtc(to)}`;
    const handle = await client.workflow.start('backfill', {
      taskQueue: ctx.config.TIDEMARK_TASK_QUEUE,
      workflowId,
      workflowIdConflictPolicy: 'USE_EXISTING',
      args: [{ job: job.name, from: isoUtc(from), to: isoUtc(to), concurrency, ...(batch ? { batch } : {}) }],
      typedSearchAttributes: searchAttributes('backfill', job.name),
      staticSummary: `backfill of ${job.name}, windows starting in [${isoUtc(from)}, ${isoUtc(to)})${batch ? `, ${batch} per batch` : ''}`,
    });
    if (values['no-wait'])
      return {
        json: { job: job.name, workflowId, started: true, ...(notClosedYet ? { notClosedYet } : {}) },
        lines: [`backfill ${workflowId} started`, ...(note ? [note] : [])],
      };
    const say = (line: string) => (ctx.io.json ? ctx.io.err(line) : ctx.io.out(line));
    say(
      `backfill ${workflowId}: ${closed} windows, ${batch ? `batches of ${batch}, ` : ''}${concurrency} at once`,
    );
    if (note) say(note);
    const idle = await noWorkerNote(client, ctx.config.TIDEMARK_TASK_QUEUE, 'the backfill');
    if (idle) ctx.io.err(`tidemark backfill: ${idle}`);
    let last = '';
    const progress = askEvery(
      1_000,
      // A question that has waited 5 s (no worker polling) is asked again at a later beat.
      (signal) => boundedCall(client, signal, 5_000, () => handle.query<BackfillProgress>('progress')),
      (p) => {
        const line = `${bar(p.processed + p.alreadyDone + p.running + p.failed.length, closed)} processed ${p.processed}, already done ${p.alreadyDone}, failed ${p.failed.length}`;
        if (line === last) return;
        last = line;
        if (ctx.io.tty && !ctx.io.json) process.stdout.write(`\r${line}`);
        else say(line);
      },
    );
    try {
      const r = (await handle.result()) as BackfillResult;
      if (ctx.io.tty && !ctx.io.json && last) process.stdout.write('\n');
      return {
        json: { workflowId, ...r, ...(notClosedYet ? { notClosedYet } : {}) },
        lines: [
          `done: processed ${r.processed}, already done ${r.alreadyDone}, running elsewhere ${r.running}, failed ${r.failed.length}${r.failed.length ? ` (${[...r.failed].sort().join(', ')})` : ''}`,
        ],
        // Failed windows fail the command (a script must not read "done" as success); they were alerted.
        ...(r.failed.length ? { exitCode: 1 } : {}),
      };
    } finally {
      await progress.stop();
    }
  },
};
