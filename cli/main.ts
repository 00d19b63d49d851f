// The tidemark CLI: preview a job, sync schedules, start a backfill, fire a tick now.
// Usage: npm run tidemark -- <command> [args]   (see `help`)
import { parseArgs } from 'node:util';
import type { Kysely } from 'kysely';
import { decideUnknownEffect } from '../activities/decisions.js';
import { createDb, ensureDatabase, migrate } from '../db/database.js';
import { listEffects, openIncidents } from '../db/effects.js';
import { EFFECT_STATUS, type Database, type EffectStatus } from '../db/schema.js';
import { buildDeps } from '../workers/deps.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import { syncSchedulesWithAlerts } from '../workers/sync-schedules.js';
import { Client, Connection } from '@temporalio/client';
import { loadConfig } from '../config/env.js';
import { buildCatalog } from '../jobs/catalog.js';
import { searchAttributes } from '../workflows/search-attributes.js';
import { formatPreview, previewJob } from '../schedules/preview.js';
import { describePlan, scheduleIdOf } from '../schedules/sync.js';
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
  effects list [--window KEY] [--job J] [--status S]
                                           external effects and their state (S: pending, begun, done,
                                           unknown, failed, skipped; repeatable as a comma list)
  effects decide <effect key> --resend|--skip [--by NAME]
                                           resolve an effect whose outcome is unknown
  incidents [--job J]                      open incidents (failures alerted and not yet cleared)
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
  await ensureSearchAttributes(connection, config.TEMPORAL_NAMESPACE);
  return { client: new Client({ connection, namespace: config.TEMPORAL_NAMESPACE }), config, close: () => connection.close() };
}

async function openDb(config: ReturnType<typeof loadConfig>): Promise<Kysely<Database>> {
  await ensureDatabase(config.DATABASE_URL);
  const db = createDb(config.DATABASE_URL, { max: 2 });
  await migrate(db);
  return db;
}

export async function run(argv: string[], out: (line: string) => void = console.log): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv, allowPositionals: true, strict: true,
    options: {
      count: { type: 'string' }, now: { type: 'string' }, 'dry-run': { type: 'boolean' },
      from: { type: 'string' }, to: { type: 'string' }, concurrency: { type: 'string' }, wait: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      window: { type: 'string' }, job: { type: 'string' }, status: { type: 'string' },
      resend: { type: 'boolean' }, skip: { type: 'boolean' }, by: { type: 'string' },
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
      const db = await openDb(config);
      try {
        const plan = await syncSchedulesWithAlerts(buildDeps(config, { db, catalog, client }), client, catalog, { taskQueue: config.TIDEMARK_TASK_QUEUE, apply: !values['dry-run'] });
        out(`${values['dry-run'] ? 'would apply (dry run)' : 'applied'}:\n${describePlan(plan)}`);
        if (plan.failed.length > 0) throw new Error(`${plan.failed.length} schedule(s) could not be synced (alerted)`);
      } finally {
        await db.destroy();
        await close();
      }
      return;
    }
    case 'effects': {
      const config = loadConfig();
      const db = await openDb(config);
      try {
        if (arg === 'list') {
          const statuses = values.status?.split(',').map((x) => x.trim()) ?? [];
          const bad = statuses.filter((x) => !(x in EFFECT_STATUS));
          if (bad.length) throw new UsageError(`--status: "${bad.join(',')}" is not one of ${Object.keys(EFFECT_STATUS).join(', ')}`);
          const rows = await listEffects(db, { windowKey: values.window, job: values.job, status: statuses as EffectStatus[] });
          for (const r of rows) out(`${r.status.padEnd(8)} ${r.effect_key}  ${r.channel} attempts=${r.attempts}${r.provider_id ? ` id=${r.provider_id}` : ''}${r.last_error ? `  ${r.last_error}` : ''}`);
          if (rows.length === 0) out('(no effects)');
          return;
        }
        if (arg === 'decide') {
          const key = positionals[2];
          if (!key) throw new UsageError('effects decide: name the effect key (see: effects list --status unknown)');
          if (!!values.resend === !!values.skip) throw new UsageError('effects decide: give exactly one of --resend or --skip');
          const result = await decideUnknownEffect(buildDeps(config, { db, catalog }), key, values.resend ? 'resend' : 'skip', values.by ?? process.env.USER ?? 'cli');
          out(`${key}: ${result.outcome}${result.providerId ? ` (provider id ${result.providerId})` : ''}`);
          return;
        }
        throw new UsageError('effects: use "effects list" or "effects decide"');
      } finally {
        await db.destroy();
      }
    }
    case 'incidents': {
      const config = loadConfig();
      const db = await openDb(config);
      try {
        const rows = await openIncidents(db, values.job);
        for (const i of rows) out(`#${i.id} ${i.job} ${i.subject} ${i.kind} since ${i.opened_at.toISOString()} x${i.occurrences}: ${i.last_error}`);
        if (rows.length === 0) out('(no open incidents)');
      } finally {
        await db.destroy();
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
          typedSearchAttributes: searchAttributes('backfill', job.name),
          staticSummary: `backfill of ${job.name}, windows starting in [${isoUtc(from)}, ${isoUtc(to)})`,
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
