// The built-in job that keeps tidemark's own tables bounded for years: run records, settled
// effects' attempts, closed incidents and quarantine (exported first) older than their retention
// go in small batches before the window's transaction; the window's run record reports counts.
import { resolve } from 'node:path';
import { sql } from 'kysely';
import { z } from 'zod';
import { compactDoneMarkers } from '../../db/compaction.js';
import { foldCounts } from '../../db/counts.js';
import { ledger } from '../../db/ledger-schema.js';
import { parseDuration } from '../../schedules/duration.js';
import { type Catalog, type JobSpec, type WindowPreparer } from '../../schedules/job.js';
import { defineCatalog, JobDefinitionError } from '../../schedules/define.js';
import { ensureWritable } from './export.js';
import {
  BUDGET_SPENT,
  KINDS,
  markBudgetSpent,
  pruneProgress,
  removeBatch,
  TABLE_OF,
  type BatchScope,
  type Kind,
} from './tables.js';

/** The job's name: `tidemark:_housekeeping` is not a legal job name (a-z, 0-9, dashes), this is the closest. */
export const HOUSEKEEPING_JOB = 'tidemark-housekeeping';

/** Kinds with a retention: the tables' rows, and `markers` (done markers older than it are folded into spans). */
export const RETENTION_KINDS = Object.freeze([...KINDS, 'markers'] as const);
export type RetentionKind = (typeof RETENTION_KINDS)[number];

export const DEFAULT_RETENTION: Readonly<Record<RetentionKind, string>> = Object.freeze({
  runs: '90d',
  attempts: '90d',
  incidents: '180d',
  quarantine: '90d',
  markers: '90d',
});

export interface HousekeepingOptions {
  /** Where quarantine is exported before removal: `<stateDir>/quarantine/<job>/`. */
  stateDir: string;
  /** Per kind, how long rows are kept ("90d"). */
  retention?: Partial<Record<RetentionKind, string>>;
  /** Rows per delete transaction; default 5,000. */
  batchSize?: number;
  /** How long one window may delete before it stops (the next window resumes); default "10m". */
  budget?: string;
  /** The job's grid; default "day", its tick at 03:17 in `timezone` (a quiet hour). */
  grid?: string;
  timezone?: string;
  tick?: { cron: string; timezone?: string };
  /** Test seam: after a quarantine batch is exported, before its delete commits. */
  afterExport?: BatchScope['afterExport'];
}

const duration = z.string().refine((s) => parseDuration(s) !== undefined, 'not a duration: use e.g. "90d"');
// Under a day, a retried batch's earlier attempts' run records (and the window runs the page shows
// as recent) could go while still read; "1m" is a minute, not a month.
const retentionSchema = duration.refine(
  (s) => parseDuration(s)! >= 86_400_000,
  'must be at least 1d ("m" is minutes): use e.g. "90d"',
);
const optionsSchema = z
  .object({
    stateDir: z.string().min(1),
    retention: z
      .object(Object.fromEntries(RETENTION_KINDS.map((k) => [k, retentionSchema.optional()])))
      .strict()
      .optional(),
    batchSize: z.number().int('must be a whole number').min(1).max(100_000).optional(),
    budget: duration.optional(),
    grid: z.string().optional(),
    timezone: z.string().optional(),
    tick: z.object({ cron: z.string(), timezone: z.string().optional() }).optional(),
    afterExport: z.function().optional(),
  })
  .strict();

/** The deleting steps of one housekeeping window, in order; the done markers' folding runs after them. */
export const HOUSEKEEPING_STEPS: readonly Kind[] = KINDS;

/** The progress row of the done markers folded into spans (db/compaction.ts). */
const MARKERS = 'job_windows (folded into spans)';

/** The built-in housekeeping job's definition. Bad options throw naming `housekeeping.<field>`. */
export function housekeeping(opts: HousekeepingOptions): JobSpec {
  const parsed = optionsSchema.safeParse(opts);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new JobDefinitionError(HOUSEKEEPING_JOB, `housekeeping.${issue.path.join('.')}`, issue.message);
  }
  const retentionMs = Object.fromEntries(
    RETENTION_KINDS.map((k) => [k, parseDuration(opts.retention?.[k] ?? DEFAULT_RETENTION[k])!]),
  ) as Record<RetentionKind, number>;
  const batchSize = opts.batchSize ?? 5_000;
  const budgetMs = parseDuration(opts.budget ?? '10m')!;
  const exportDir = resolve(opts.stateDir, 'quarantine');
  // Progress rows are read by their own window's report only: kept as long as the longest retention.
  const progressMs = Math.max(...Object.values(retentionMs));

  const prepare: WindowPreparer = async ({ ledger: db, key, window, heartbeat, log }) => {
    const began = Date.now();
    // Before anything is deleted: a window that could not export quarantine removes nothing.
    await ensureWritable(exportDir);
    const pruned = await pruneProgress(db, key, new Date(window.end.getTime() - progressMs));
    if (pruned > 0) log(`HOUSEKEEPING pruned window=${key} housekeeping_progress=${pruned}`);
    const scope: BatchScope = { db, key, batchSize, exportDir, afterExport: opts.afterExport };
    for (const kind of HOUSEKEEPING_STEPS) {
      // Ages are measured at the window's end, so a retry of the window removes the same set.
      const cutoff = new Date(window.end.getTime() - retentionMs[kind]);
      for (;;) {
        const n = await removeBatch(scope, kind, cutoff);
        if (n === 0) break;
        log(`HOUSEKEEPING batch window=${key} table=${TABLE_OF[kind]} rows=${n}`);
        heartbeat({ kind, n });
        // Checked after a batch, so every window makes progress however small the budget.
        if (Date.now() - began >= budgetMs) {
          await markBudgetSpent(db, key);
          log(`HOUSEKEEPING budget spent window=${key}: the next window resumes`);
          return;
        }
      }
    }
    // Done markers are never removed (a window presented again years later must still be refused):
    // contiguous old ones are folded into spans, a few bytes for any number of windows.
    const cutoff = new Date(window.end.getTime() - retentionMs.markers);
    try {
      const folded = await compactDoneMarkers(db, { cutoff, batch: Math.max(batchSize, 1_000) });
      await db.transaction().execute(async (trx) => {
        await sql`insert into ${ledger(trx).housekeeping_progress} (window_key, tbl, batches, rows)
          values (${key}, ${MARKERS}, ${folded.batches}, ${folded.windows})
          on conflict (window_key, tbl) do update set batches = housekeeping_progress.batches + excluded.batches,
            rows = housekeeping_progress.rows + excluded.rows, updated_at = now()`.execute(trx);
      });
      log(`HOUSEKEEPING folded window=${key} markers=${folded.windows} batches=${folded.batches}`);
    } catch (e) {
      // A job whose window transactions held its lock past the timeout is folded by the next window.
      log(`HOUSEKEEPING folding stopped window=${key}: ${e instanceof Error ? e.message : String(e)}`);
    }
    // The overview's and /metrics' counts: each job's delta rows summed into one per status.
    log(`HOUSEKEEPING counts folded window=${key} rows=${await foldCounts(db)}`);
  };

  return {
    name: HOUSEKEEPING_JOB,
    description: "Removes tidemark's own old run records, attempts, closed incidents and quarantine",
    grid: opts.grid ?? 'day',
    timezone: opts.timezone ?? 'UTC',
    tick: opts.tick ?? { cron: '17 3 * * *' },
    maxCatchUp: 2,
    heartbeatTimeout: '2m',
    attemptTimeout: '30m',
    noPreview:
      'it deletes in batches that commit on their own before the handler, which no rollback would undo',
    prepare,
    // Its work is on tidemark's own tables: the transaction that names their schema.
    handler: async ({ ledger: trx, key, window }) => {
      const rows = await trx
        .selectFrom('housekeeping_progress')
        .select(['tbl', 'batches', 'rows'])
        .where('window_key', '=', key)
        .execute();
      const removed = Object.fromEntries(Object.values(TABLE_OF).map((t) => [t, 0]));
      const batches = { ...removed };
      const complete = !rows.some((r) => r.tbl === BUDGET_SPENT);
      const markers = rows.find((r) => r.tbl === MARKERS);
      const compacted = { windows: markers ? Number(markers.rows) : 0, batches: markers?.batches ?? 0 };
      for (const r of rows.filter((r) => r.tbl !== BUDGET_SPENT && r.tbl !== MARKERS)) {
        removed[r.tbl] = Number(r.rows);
        batches[r.tbl] = r.batches;
      }
      const total = Object.values(removed).reduce((a, b) => a + b, 0);
      const cutoffs = Object.fromEntries(
        KINDS.map((k) => [TABLE_OF[k], new Date(window.end.getTime() - retentionMs[k]).toISOString()]),
      );
      cutoffs.job_windows = new Date(window.end.getTime() - retentionMs.markers).toISOString();
      return {
        input: total,
        applied: total,
        quarantined: 0,
        details: { removed, batches, compacted, complete, cutoffs, batchSize },
      };
    },
  };
}

/** The settings housekeeping reads: config/env.ts's TIDEMARK_STATE_DIR and TIDEMARK_HOUSEKEEPING*. */
export interface HousekeepingSettings {
  readonly TIDEMARK_STATE_DIR: string;
  readonly TIDEMARK_HOUSEKEEPING: 'on' | 'off';
  readonly TIDEMARK_HOUSEKEEPING_RETENTION?: HousekeepingOptions['retention'];
  readonly TIDEMARK_HOUSEKEEPING_BATCH_SIZE?: number;
}

/** Housekeeping as the configuration sets it (TIDEMARK_HOUSEKEEPING*), or undefined when it is off. */
export function housekeepingFromConfig(
  config: HousekeepingSettings,
  overrides: Partial<HousekeepingOptions> = {},
): JobSpec | undefined {
  if (config.TIDEMARK_HOUSEKEEPING === 'off') return undefined;
  return housekeeping({
    stateDir: config.TIDEMARK_STATE_DIR,
    retention: config.TIDEMARK_HOUSEKEEPING_RETENTION,
    ...(config.TIDEMARK_HOUSEKEEPING_BATCH_SIZE
      ? { batchSize: config.TIDEMARK_HOUSEKEEPING_BATCH_SIZE }
      : {}),
    ...overrides,
  });
}

/**
 * `catalog` with the housekeeping job added, unless the configuration turns it off or the
 * catalog declares it itself (to set its options in code).
 */
export function withHousekeeping(catalog: Catalog, config: HousekeepingSettings): Catalog {
  if (catalog.has(HOUSEKEEPING_JOB)) return catalog;
  const job = housekeepingFromConfig(config);
  return job
    ? defineCatalog([...catalog.jobs, job], {
        migrations: catalog.migrations,
        spreadTicks: catalog.spreadTicks,
      })
    : catalog;
}
