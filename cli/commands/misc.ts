// preview, schedules sync, effects and incidents.
import { isFallbackDemo } from '../../config/catalog-source.js';
import { watchQueueOf } from '../../config/env.js';
import { decideUnknownEffect, retryFailedEffect } from '../../activities/decisions.js';
import {
  databaseExists,
  dropPublicCompat,
  migrate,
  migrateCatalog,
  migrationPlan,
  moveLedgerFromPublic,
  redactUrl,
} from '../../db/database.js';
import { listEffects, openIncidents } from '../../db/effects.js';
import { EFFECT_STATUS, type EffectStatus } from '../../db/schema.js';
import { formatPreview, previewJob } from '../../schedules/preview.js';
import { describePlan } from '../../workers/schedule-sync.js';
import { isoUtc } from '../../contract/window-key.js';
import { buildDeps } from '../../workers/deps.js';
import { syncSchedulesWithAlerts } from '../../workers/sync-schedules.js';
import type { Command } from '../command.js';
import { asSignedIn, readLogin, type Login } from '../login.js';
import { positiveInt, table, UsageError } from '../context.js';
import { parseWhen } from '../../operator/dates.js';

export const previewCommand: Command = {
  name: 'preview',
  summary: "a job's next tick fire times and next windows (no server needed)",
  usage: ['preview <job> [--count N] [--now DATE] [--json]'],
  options: { count: { type: 'string' }, now: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    const job = ctx.job(positionals[0], 'preview');
    const now = values.now ? parseWhen('--now', values.now as string, job.timezone) : new Date();
    const p = previewJob(job, now, positiveInt('count', values.count as string | undefined, 5));
    return { json: p, lines: formatPreview(p).split('\n') };
  },
};

export const migrateCommand: Command = {
  name: 'migrate',
  summary: "create or update tidemark's tables (in their own schema) and the catalog's own tables",
  usage: ['migrate [--dry-run] [--json]', 'migrate --drop-public-compat [--dry-run] [--json]'],
  options: { 'dry-run': { type: 'boolean' }, 'drop-public-compat': { type: 'boolean' } },
  async run(ctx, { values }) {
    const dry = !!values['dry-run'];
    // A dry run creates nothing, not even the database.
    if (dry && !(await databaseExists(ctx.config.DATABASE_URL)))
      return {
        json: { databaseExists: false, applied: false },
        lines: [
          `the database of DATABASE_URL (${redactUrl(ctx.config.DATABASE_URL)}) does not exist: tidemark migrate would create it, then tidemark's schema and every migration`,
        ],
      };
    const db = await ctx.db({ migrated: false });
    if (values['drop-public-compat']) {
      // The views and wrappers an upgrade from 0.1.0 left in public for that release's workers.
      const dropped = await dropPublicCompat(db, { dryRun: dry });
      return {
        json: dry ? { wouldDrop: dropped, applied: false } : { dropped },
        lines: [
          dropped.length
            ? `${dry ? 'would drop' : 'dropped'} from schema public what workers of 0.1.0 used: ${dropped.join(', ')}`
            : 'nothing of an earlier release left in schema public',
        ],
      };
    }
    // No catalog named: the demo's tables are not made in what may be the user's own database.
    const unnamed = isFallbackDemo(ctx.catalog);
    const own = unnamed ? {} : ctx.catalog.migrations;
    const plan = await migrationPlan(db, own);
    const catalogLine = (list: readonly string[], verb: string) =>
      unnamed
        ? 'catalog: none named (--catalog, TIDEMARK_CATALOG or tidemark.config.*): only the ledger is migrated'
        : Object.keys(own).length === 0
          ? 'catalog: no migrations of its own'
          : `catalog: ${list.length ? `${verb} ${list.length}: ${list.join(', ')}` : 'up to date'}`;
    const ledgerLine = (list: readonly string[], verb: string) =>
      `ledger (schema ${plan.schema}): ${list.length ? `${verb} ${list.length}, last ${list[list.length - 1]}` : 'up to date'}`;
    if (dry)
      return {
        json: { ...plan, applied: false },
        lines: [
          ...(plan.moveFromPublic
            ? [`would move the ledger of an earlier release from schema public into ${plan.schema}`]
            : []),
          ledgerLine(plan.ledger, 'would apply'),
          catalogLine(plan.catalog, 'would apply'),
        ],
      };
    const moved = await moveLedgerFromPublic(db);
    const ledger = await migrate(db);
    const catalog = await migrateCatalog(db, own);
    return {
      json: { schema: plan.schema, moved, ledger, catalog, applied: true },
      lines: [
        ...(moved.length
          ? [`moved the ledger from schema public into ${plan.schema}: ${moved.length} tables and functions`]
          : []),
        ledgerLine(ledger, 'applied'),
        catalogLine(catalog, 'applied'),
      ],
    };
  },
};

export const schedulesCommand: Command = {
  name: 'schedules',
  summary: 'make the Temporal Schedules match the catalog (create, update, delete; pauses kept)',
  usage: ['schedules sync [--dry-run] [--json]'],
  options: { 'dry-run': { type: 'boolean' } },
  async run(ctx, { positionals, values }) {
    if (positionals[0] !== 'sync') throw new UsageError('schedules: the only subcommand is "sync"');
    const [db, client] = [await ctx.db(), await ctx.client()];
    const plan = await syncSchedulesWithAlerts(
      buildDeps(ctx.config, { db, catalog: ctx.catalog, client }),
      client,
      ctx.catalog,
      {
        taskQueue: ctx.config.TIDEMARK_TASK_QUEUE,
        watchTaskQueue: watchQueueOf(ctx.config),
        apply: !values['dry-run'],
      },
    );
    if (plan.failed.length > 0)
      throw new Error(
        `${plan.failed.length} schedule(s) could not be synced (alerted):\n${describePlan(plan)}`,
      );
    return {
      json: plan,
      lines: [
        `${values['dry-run'] ? 'would apply (dry run)' : 'applied'}:`,
        ...describePlan(plan).split('\n'),
      ],
    };
  },
};

/** `tidemark sync`: the same as `schedules sync`. */
export const syncCommand: Command = {
  ...schedulesCommand,
  name: 'sync',
  summary: 'the same as schedules sync',
  usage: ['sync [--dry-run] [--json]'],
  run: (ctx, args) => schedulesCommand.run(ctx, { ...args, positionals: ['sync', ...args.positionals] }),
};

export const effectsCommand: Command = {
  name: 'effects',
  summary: 'external effects and their state; decide one whose outcome is unknown, retry a failed one',
  usage: [
    'effects list [--window KEY] [--job J] [--status S[,S]] [--json]',
    'effects decide <effect key> --resend|--skip [--by NAME] [--json]',
    'effects retry <effect key> [--by NAME] [--json]',
  ],
  options: {
    window: { type: 'string' },
    job: { type: 'string' },
    status: { type: 'string' },
    resend: { type: 'boolean' },
    skip: { type: 'boolean' },
    by: { type: 'string' },
  },
  async run(ctx, { positionals, values }) {
    if (positionals[0] === 'list') {
      const statuses = (values.status as string | undefined)?.split(',').map((x) => x.trim()) ?? [];
      const bad = statuses.filter((x) => !(x in EFFECT_STATUS));
      if (bad.length)
        throw new UsageError(
          `--status: "${bad.join(',')}" is not one of ${Object.keys(EFFECT_STATUS).join(', ')}`,
        );
      const db = await ctx.db();
      const rows = await listEffects(db, {
        windowKey: values.window as string | undefined,
        job: values.job as string | undefined,
        status: statuses as EffectStatus[],
      });
      const json = rows.map((r) => ({
        key: r.effect_key,
        channel: r.channel,
        status: r.status,
        policy: r.policy,
        attempts: r.attempts,
        providerId: r.provider_id,
        lastError: r.last_error,
        doneAt: r.done_at ? isoUtc(r.done_at) : null,
      }));
      return {
        json,
        lines: json.length
          ? table(
              ['STATUS', 'EFFECT', 'CHANNEL', 'ATTEMPTS', 'PROVIDER ID', 'LAST ERROR'],
              json.map((r) => [r.status, r.key, r.channel, r.attempts, r.providerId, r.lastError]),
            )
          : ['(no effects)'],
      };
    }
    if (positionals[0] === 'decide') {
      const key = positionals[1];
      if (!key)
        throw new UsageError('effects decide: name the effect key (see: effects list --status unknown)');
      if (!!values.resend === !!values.skip)
        throw new UsageError('effects decide: give exactly one of --resend or --skip');
      const login = await readLogin();
      if (login) return decidedThroughPage(login, key, values.resend ? 'resend' : 'skip', values.by);
      const result = await decideUnknownEffect(
        buildDeps(ctx.config, { db: await ctx.db(), catalog: ctx.catalog }),
        key,
        values.resend ? 'resend' : 'skip',
        (values.by as string | undefined) ?? process.env.USER ?? 'cli',
      );
      return {
        json: result,
        lines: [`${key}: ${result.outcome}${result.providerId ? ` (provider id ${result.providerId})` : ''}`],
      };
    }
    if (positionals[0] === 'retry') {
      const key = positionals[1];
      if (!key)
        throw new UsageError('effects retry: name the effect key (see: effects list --status failed)');
      const login = await readLogin();
      if (login) return decidedThroughPage(login, key, 'resend', values.by);
      const result = await retryFailedEffect(
        buildDeps(ctx.config, { db: await ctx.db(), catalog: ctx.catalog }),
        key,
        (values.by as string | undefined) ?? process.env.USER ?? 'cli',
      );
      return { json: result, lines: [`${key}: ${result.outcome}`] };
    }
    throw new UsageError('effects: use "effects list", "effects decide" or "effects retry"');
  },
};

export const incidentsCommand: Command = {
  name: 'incidents',
  summary: 'open incidents: failures alerted and not yet cleared',
  usage: ['incidents [--job J] [--json]'],
  options: { job: { type: 'string' } },
  async run(ctx, { values }) {
    const rows = await openIncidents(await ctx.db(), values.job as string | undefined);
    const json = rows.map((i) => ({
      id: i.id,
      job: i.job,
      subject: i.subject,
      kind: i.kind,
      since: isoUtc(i.opened_at),
      occurrences: i.occurrences,
      lastError: i.last_error,
    }));
    return {
      json,
      lines: json.length
        ? table(
            ['ID', 'JOB', 'SUBJECT', 'KIND', 'SINCE', 'TIMES', 'LAST ERROR'],
            json.map((i) => [i.id, i.job, i.subject, i.kind, i.since, i.occurrences, i.lastError]),
          )
        : ['(no open incidents)'],
    };
  },
};

/** A signed-in person's decision on an effect, made through the page (it knows who they are). */
async function decidedThroughPage(login: Login, key: string, decision: 'resend' | 'skip', by: unknown) {
  if (by && by !== login.name)
    throw new UsageError(
      `--by: you are signed in as ${login.name} and decide as yourself (npx tidemark logout to decide by name)`,
    );
  const result = await asSignedIn<{ outcome: string; providerId?: string | null }>(
    login,
    `/api/effects/${encodeURIComponent(key)}/${decision}`,
    {},
  );
  return {
    json: result,
    lines: [`${key}: ${result.outcome}${result.providerId ? ` (provider id ${result.providerId})` : ''}`],
  };
}
