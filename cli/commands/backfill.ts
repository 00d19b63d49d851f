// backfill: every closed window of a range; the dry run says what would happen to each window,
// the real one shows progress (a bar on a terminal, plain lines otherwise) and a summary.
import { doneStarts } from '../../db/ledger.js';
import { isClosed, isoUtc, windowKey, windowsInRange } from '../../schedules/windows.js';
import { searchAttributes } from '../../workflows/search-attributes.js';
import {
  MAX_BATCH,
  MAX_CONCURRENCY,
  type BackfillProgress,
  type BackfillResult,
} from '../../workflows/types.js';
import type { Command } from '../command.js';
import { positiveInt, table, UsageError } from '../context.js';
import { parseWhen } from '../dates.js';

function bar(done: number, total: number, width = 30): string {
  const filled = total > 0 ? Math.round((done / total) * width) : width;
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}`;
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

    if (values['dry-run']) {
      const done = windows.length
        ? await doneStarts(await ctx.db(), job.name, windows[0]!.start, windows.at(-1)!.end)
        : new Set<number>();
      const now = new Date();
      const plan = windows.map((w) => ({
        window: windowKey(job.name, w.start),
        start: isoUtc(w.start),
        end: isoUtc(w.end),
        action: done.has(w.start.getTime())
          ? 'skip: already done'
          : isClosed(w, now, job.latenessMs)
            ? 'process'
            : 'skip: not closed yet',
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
        ],
      };
    }

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
        json: { job: job.name, workflowId, started: true },
        lines: [`backfill ${workflowId} started`],
      };
    const say = (line: string) => (ctx.io.json ? ctx.io.err(line) : ctx.io.out(line));
    say(
      `backfill ${workflowId}: ${windows.length} windows, ${batch ? `batches of ${batch}, ` : ''}${concurrency} at once`,
    );
    let last = '';
    const timer = setInterval(() => {
      handle.query<BackfillProgress>('progress').then(
        (p) => {
          const line = `${bar(p.processed + p.alreadyDone + p.running + p.failed.length, windows.length)} processed ${p.processed}, already done ${p.alreadyDone}, failed ${p.failed.length}`;
          if (line === last) return;
          last = line;
          if (ctx.io.tty && !ctx.io.json) process.stdout.write(`\r${line}`);
          else say(line);
        },
        () => undefined,
      );
    }, 1_000);
    try {
      const r = (await handle.result()) as BackfillResult;
      if (ctx.io.tty && !ctx.io.json && last) process.stdout.write('\n');
      return {
        json: { workflowId, ...r },
        lines: [
          `done: processed ${r.processed}, already done ${r.alreadyDone}, running elsewhere ${r.running}, failed ${r.failed.length}${r.failed.length ? ` (${r.failed.join(', ')})` : ''}`,
        ],
      };
    } finally {
      clearInterval(timer);
    }
  },
};
