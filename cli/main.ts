// The tidemark CLI: preview a job, sync schedules, start a backfill, fire a tick now.
// Usage: npm run tidemark -- <command> [args]   (see `help`)
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../config/env.js';
import { buildCatalog } from '../jobs/catalog.js';
import { formatPreview, previewJob } from '../schedules/preview.js';
import { describePlan, scheduleIdOf, syncSchedules } from '../schedules/sync.js';
import { isoUtc } from '../schedules/windows.js';
import type { BackfillProgress, BackfillResult } from '../workflows/types.js';
import { UnknownJobError } from '../schedules/job.js';
import { DateArgumentError, parseWhen } from './dates.js';

const HELP = `tidemark <command>
  jobs                                     list the jobs of the catalog
  preview <job> [--count N] [--now ISO]    next tick fire times and next windows of a job
  schedules sync [--dry-run]               make Temporal Schedules match the catalog
  trigger <job>                            fire the job's tick now
  backfill <job> --from <date> --to <date> [--concurrency N] [--wait]
                                           process every closed window whose start is in [from, to)
Dates: ISO-8601 instants, or plain dates (2026-03-01) read in the job's time zone.
Environment: TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE, TIDEMARK_TASK_QUEUE.`;

export class UsageError extends Error {}

export const isUsageError = (err: unknown): boolean =>
  err instanceof UsageError || err instanceof DateArgumentError || err instanceof UnknownJobError || (err as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS') === true;

async function connect(): Promise<{ client: Client; config: ReturnType<typeof loadConfig>; close: () => Promise<void> }> {
  const config = loadConfig();
  const address = config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`;
  const connection = await Connection.connect({ address, connectTimeout: 5_000 }).catch((err: unknown) => {
    throw new Error(`cannot reach Temporal at ${address} (${(err as Error).message}); start it with npm start or set TEMPORAL_ADDRESS`);
  });
  return { client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), config, close: () => connection.close() };
}

export async function run(argv: string[], out: (line: string) => void = console.log): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv, allowPositionals: true, strict: true,
    options: {
      count: { type: 'string' }, now: { type: 'string' }, 'dry-run': { type: 'boolean' },
      from: { type: 'string' }, to: { type: 'string' }, concurrency: { type: 'string' }, wait: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, arg] = positionals;
  const catalog = buildCatalog();
  const jobArg = () => {
    if (!arg) throw new UsageError(`${command}: name a job (${catalog.jobs.map((j) => j.name).join(', ')})`);
    return catalog.get(arg);
  };
  const int = (name: string, text: string | undefined, dflt: number) => {
    if (text === undefined) return dflt;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name}: "${text}" is not a whole number of at least 1`);
    return n;
  };

  switch (command) {
    case undefined:
    case 'help':
      out(HELP);
      return;
    case 'jobs':
      for (const j of catalog.jobs) out(`${j.name.padEnd(24)} grid ${j.grid.label.padEnd(6)} ${j.timezone.padEnd(18)} tick "${j.tick.cron}" ${j.tick.timezone}  ${j.description}`);
      return;
    case 'preview': {
      const now = values.now ? parseWhen('--now', values.now, 'UTC') : new Date();
      out(formatPreview(previewJob(jobArg(), now, int('count', values.count, 5))));
      return;
    }
    case 'schedules': {
      if (arg !== 'sync') throw new UsageError('schedules: the only subcommand is "sync"');
      const { client, config, close } = await connect();
      try {
        const plan = await syncSchedules(client, catalog, { taskQueue: config.TIDEMARK_TASK_QUEUE, apply: !values['dry-run'] });
        out(`${values['dry-run'] ? 'would apply (dry run)' : 'applied'}:\n${describePlan(plan)}`);
      } finally {
        await close();
      }
      return;
    }
    case 'trigger': {
      const job = jobArg();
      const { client, close } = await connect();
      try {
        await client.schedule.getHandle(scheduleIdOf(job.name)).trigger();
        out(`tick of ${job.name} fired; its runs show as ${job.name}/tick-<time> in the Web UI`);
      } finally {
        await close();
      }
      return;
    }
    case 'backfill': {
      const job = jobArg();
      if (!values.from || !values.to) throw new UsageError('backfill: --from and --to are required');
      const from = parseWhen('--from', values.from, job.timezone);
      const to = parseWhen('--to', values.to, job.timezone);
      if (!(from < to)) throw new UsageError(`backfill: --from (${isoUtc(from)}) must be before --to (${isoUtc(to)})`);
      const { client, config, close } = await connect();
      try {
        const workflowId = `${job.name}/backfill-${isoUtc(from)}-${isoUtc(to)}`;
        const handle = await client.workflow.start('backfill', {
          taskQueue: config.TIDEMARK_TASK_QUEUE, workflowId,
          args: [{ job: job.name, from: isoUtc(from), to: isoUtc(to), concurrency: int('concurrency', values.concurrency, 8) }],
          workflowIdConflictPolicy: 'USE_EXISTING',
        });
        out(`backfill ${workflowId} started`);
        if (!values.wait) return;
        const timer = setInterval(() => {
          handle.query<BackfillProgress>('progress').then((p) => out(`  processed ${p.processed}, already done ${p.alreadyDone}, running elsewhere ${p.running}, failed ${p.failed.length}, in flight ${p.inFlight}`), () => undefined);
        }, 2_000);
        try {
          const r = await handle.result() as BackfillResult;
          out(`done: processed ${r.processed}, already done ${r.alreadyDone}, running elsewhere ${r.running}, failed ${r.failed.length}${r.failed.length ? ` (${r.failed.join(', ')})` : ''}`);
        } finally {
          clearInterval(timer);
        }
      } finally {
        await close();
      }
      return;
    }
    default:
      throw new UsageError(`unknown command "${command}"\n\n${HELP}`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  run(process.argv.slice(2)).catch((err: unknown) => {
    console.error(`tidemark: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(isUsageError(err) ? 2 : 1);
  });
}
