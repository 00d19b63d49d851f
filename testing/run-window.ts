// For job authors' own tests: one window of a job run against a database exactly as a worker's
// window activity runs it (the ledger's claim, the handler in the window's transaction with its
// done marker and the watermark), without Temporal, and without performing its effects: what it
// did comes back, to assert on. Like graphile-worker's runTaskListOnce.
import { memoryLogger } from '../activities/logger.js';
import { windowActivities } from '../activities/window.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import { createDb, ensureDatabase, migrateAll } from '../db/database.js';
import { checkSchemaName, DEFAULT_SCHEMA } from '../db/ledger-schema.js';
import type { RetryPolicyDto } from '../contract/workflows.js';
import type { Catalog } from '../schedules/job.js';
import { windowAt } from '../schedules/windows.js';

export interface WindowRunReport {
  /** `processed`, or `already-done` when the ledger holds the window done (nothing ran). */
  readonly outcome: 'processed' | 'already-done';
  readonly key: string;
  readonly window: { readonly start: string; readonly end: string };
  readonly counts: { readonly input: number; readonly applied: number; readonly quarantined: number } | null;
  /** The effects the run recorded (its outbox), not performed: a worker would send them. */
  readonly effects: readonly {
    readonly name: string;
    readonly channel: string;
    readonly request: unknown;
    /** Its own retry policy, merged with the job's; null: the job's. */
    readonly retry: RetryPolicyDto | null;
  }[];
  /** The handler's findings (each alerts once a worker runs the window; here none is sent). */
  readonly findings: readonly { readonly subject: string; readonly message: string }[];
  /** What it set aside with ctx.quarantine (or its own statements), this window and generation. */
  readonly quarantined: readonly {
    readonly key: string;
    readonly reason: string;
    readonly payload: unknown;
  }[];
  /** The lines the run logged. */
  readonly log: readonly string[];
}

/**
 * Runs the window of `job` that starts at `start` (a window start of its grid, and closed by `now`)
 * on `databaseUrl`, after migrating it (tidemark's schema and the catalog's own migrations).
 */
export async function runWindowOnce(opts: {
  readonly databaseUrl: string;
  readonly catalog: Catalog;
  readonly job: string;
  readonly start: string | Date;
  readonly generation?: number;
  /** The ledger's schema (TIDEMARK_SCHEMA); default tidemark. */
  readonly schema?: string;
  /** The clock the run sees (the window must be closed by it); default now. */
  readonly now?: Date;
}): Promise<WindowRunReport> {
  const job = opts.catalog.get(opts.job);
  const at = new Date(opts.start);
  if (Number.isNaN(at.getTime()))
    throw new Error(`runWindowOnce: start "${String(opts.start)}" is not an instant`);
  const w = windowAt(job.grid, job.timezone, at);
  if (w.start.getTime() !== at.getTime())
    throw new Error(
      `runWindowOnce: ${isoUtc(at)} is not a window start of job "${job.name}" (grid "${job.grid.label}" in ${job.timezone}); the window containing it starts at ${isoUtc(w.start)}`,
    );
  const generation = opts.generation ?? 0;
  if (!Number.isInteger(generation) || generation < 0)
    throw new Error(`runWindowOnce: generation must be a whole number from 0 (got ${String(generation)})`);
  const schema = checkSchemaName(opts.schema ?? DEFAULT_SCHEMA, 'schema');
  const key = `${windowKey(job.name, w.start)}${generation ? `#${generation}` : ''}`;
  await ensureDatabase(opts.databaseUrl);
  const db = createDb(opts.databaseUrl, { max: 2, schema });
  const logger = memoryLogger();
  try {
    await migrateAll(db, opts.catalog.migrations);
    const now = opts.now ?? new Date();
    const result = await windowActivities({
      db,
      catalog: opts.catalog,
      logger,
      now: () => now,
    }).processWindow({
      job: job.name,
      start: isoUtc(w.start),
      end: isoUtc(w.end),
      generation,
      key,
      trigger: 'manual',
      policy: {
        retry: { maximumAttempts: 1, initialInterval: '1s', maximumInterval: '1s', backoffCoefficient: 1 },
        startToCloseTimeoutMs: job.attemptTimeoutMs,
      },
    });
    const effects = await db
      .selectFrom('effects')
      .select(['name', 'channel', 'request', 'retry'])
      .where('window_key', '=', key)
      .orderBy('name')
      .execute();
    const quarantined = await db
      .selectFrom('quarantine')
      .select(['record_key', 'reason', 'payload'])
      .where('job', '=', job.name)
      .where('window_start', '=', w.start)
      .where('generation', '=', generation)
      .orderBy('id')
      .execute();
    return {
      outcome: result.outcome,
      key,
      window: { start: isoUtc(w.start), end: isoUtc(w.end) },
      counts: result.counts ?? null,
      effects: effects.map((e) => ({ name: e.name, channel: e.channel, request: e.request, retry: e.retry })),
      findings: result.findings ?? [],
      quarantined: quarantined.map((q) => ({ key: q.record_key, reason: q.reason, payload: q.payload })),
      log: [...logger.lines],
    };
  } finally {
    await db.destroy();
  }
}
