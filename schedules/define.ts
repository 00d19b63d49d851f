// A job declaration validated into a frozen Job, and the catalog of them. A bad definition is
// refused here, before anything runs, with the job and field named.
import { Cron } from 'croner';
import { IANAZone } from 'luxon';
import { z } from 'zod';
import { formatDuration, parseDuration } from './duration.js';
import type {
  Catalog,
  CatalogMigration,
  CatalogMigrations,
  Job,
  JobSeeder,
  JobSpec,
  RetrySpec,
  Tick,
  WindowHandler,
  WindowPreparer,
  WindowSettler,
} from './job.js';
import { isAligned, parseGrid, type Grid } from './windows.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- untyped unless the author types it
type JobSpecDatabase = any;

export class JobDefinitionError extends Error {
  readonly code = 'JOB_DEFINITION';
  constructor(
    readonly job: string,
    readonly field: string,
    detail: string,
  ) {
    super(`job "${job}": ${field}: ${detail}`);
    this.name = 'JobDefinitionError';
  }
}

const DEFAULT_RETRY: RetrySpec = Object.freeze({
  maximumAttempts: 5,
  initialInterval: '1s',
  maximumInterval: '1m',
  backoffCoefficient: 2,
});

const durationText = z
  .string()
  .refine((s) => parseDuration(s) !== undefined, { message: 'not a duration: use e.g. "30s", "5m", "1h"' });

/** A retry interval as Temporal reads it: no spaces, more than zero. */
const retryInterval = z.string().refine((s) => /^[1-9][0-9]{0,8}(ms|s|m|h|d)$/.test(s), {
  message: 'not a duration more than zero: use e.g. "500ms", "30s", "5m"',
});

const COLUMN = /^[a-z_][a-z0-9_]*$/;
const SQL_NAME = /^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$/;

const clockTime = z
  .string()
  .regex(/^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$/, 'a local time such as "01:30" or "01:30:00"');

const specSchema = z
  .object({
    name: z
      .string()
      .regex(
        /^[a-z][a-z0-9-]{0,62}$/,
        'use 1-63 lowercase letters, digits and dashes, starting with a letter',
      ),
    description: z.string().optional(),
    grid: z.string(),
    timezone: z.string().default('UTC'),
    lateness: durationText.default('0m'),
    maxCatchUp: z.number().int('must be a whole number').min(1, 'must be at least 1').default(24),
    start: z.iso
      .datetime({ offset: true, message: 'not an ISO-8601 instant such as 2026-01-01T00:00:00Z' })
      .optional(),
    tick: z.object({ cron: z.string(), timezone: z.string().optional() }).strict().optional(),
    retry: z
      .object({
        maximumAttempts: z.number().int().min(1, 'must be at least 1').optional(),
        initialInterval: retryInterval.optional(),
        maximumInterval: retryInterval.optional(),
        backoffCoefficient: z.number().min(1, 'must be at least 1').optional(),
      })
      .strict()
      .optional(),
    attemptTimeout: durationText.default('10m'),
    alerts: z
      .object({
        email: z.array(z.email()).default([]),
        slack: z.array(z.string().min(1)).default([]),
        telegram: z.array(z.string().min(1)).default([]),
      })
      .strict()
      .default({ email: [], slack: [], telegram: [] }),
    lagThreshold: z.number().int('must be a whole number').min(1, 'must be at least 1').default(3),
    effectTimeout: durationText.default('1m'),
    handler: z.custom<WindowHandler>((v) => typeof v === 'function', 'must be a function (ctx) => counts'),
    seed: z.custom<JobSeeder>((v) => typeof v === 'function', 'must be a function').optional(),
    prepare: z.custom<WindowPreparer>((v) => typeof v === 'function', 'must be a function').optional(),
    settle: z.custom<WindowSettler>((v) => typeof v === 'function', 'must be a function').optional(),
    heartbeatTimeout: durationText.optional(),
    allowedHours: z.object({ from: clockTime, to: clockTime }).strict().optional(),
    writes: z
      .array(
        z
          .object({
            table: z.string().regex(SQL_NAME, 'a table name such as "daily_sales" or "crm_copy.customers"'),
            key: z
              .array(z.string().regex(COLUMN, 'a column name such as "day"'))
              .min(1, 'name the columns that identify a row, e.g. ["job", "day"]'),
            volatile: z.array(z.string().regex(COLUMN, 'a column name such as "refreshed_at"')).optional(),
          })
          .strict(),
      )
      .optional(),
    noPreview: z.string().min(1, 'say why the preview must not run the handler').optional(),
  })
  .strict();

function checkZone(name: string, field: string, zone: string): void {
  if (!IANAZone.isValidZone(zone))
    throw new JobDefinitionError(
      name,
      field,
      `unknown time zone "${zone}": use an IANA name such as "Europe/Berlin" or "UTC"`,
    );
}

/** Checks a 5-field cron and returns it; both day fields restricted at once is refused (engines disagree on OR/AND). */
export function checkCron(name: string, cron: string, zone: string): string {
  const fields = cron.trim().split(/\s+/);
  if (fields.length !== 5) {
    throw new JobDefinitionError(
      name,
      'tick.cron',
      `"${cron}" must have 5 fields: minute hour day-of-month month day-of-week`,
    );
  }
  if (fields[2] !== '*' && fields[4] !== '*') {
    throw new JobDefinitionError(
      name,
      'tick.cron',
      `"${cron}" restricts both day-of-month and day-of-week; restrict one and leave the other "*"`,
    );
  }
  try {
    new Cron(cron, { timezone: zone, mode: '5-part', paused: true });
  } catch (err) {
    throw new JobDefinitionError(name, 'tick.cron', `"${cron}" is not valid cron: ${(err as Error).message}`);
  }
  return fields.join(' ');
}

/**
 * The tick a grid implies when the job sets none: a Temporal interval from the UTC epoch, so a
 * fixed grid's tick fires at each window's end plus the lateness, to the second (a cron has only
 * minutes: a 10 s lateness would fire 10 s early and leave every window waiting a whole tick).
 * A calendar grid ticks hourly at the lateness past the hour (a tick with no closed window does
 * nothing, and UTC never skips or repeats an hour at a DST change).
 */
export function defaultTick(grid: Grid, latenessMs: number): Tick {
  const everyMs = grid.kind === 'fixed' ? grid.ms : 3_600_000;
  // Temporal rounds interval offsets to whole seconds: round up, never fire early.
  const offsetMs = (Math.ceil(latenessMs / 1000) * 1000) % everyMs;
  return { kind: 'interval', everyMs, offsetMs, derived: true };
}

/** The tick in words: `"15 0 * * *" in Europe/Berlin` or `every 1m at +10s (UTC)`. */
export function describeTick(tick: Tick): string {
  if (tick.kind === 'cron') return `"${tick.cron}" in ${tick.timezone}`;
  const offset = tick.offsetMs === 0 ? '' : ` at +${formatDuration(tick.offsetMs)}`;
  return `every ${formatDuration(tick.everyMs)}${offset} (UTC)`;
}

/** Validates one job definition; throws JobDefinitionError naming the job and the field. */
/**
 * Validates a job declaration into a frozen Job. `DB`, the job author's kysely database type, types
 * the handler's `ctx.trx` with their tables: `defineJob<ShopDb>({ ..., handler: async (ctx) => ... })`.
 */
export function defineJob<DB = JobSpecDatabase>(spec: JobSpec<DB>): Job {
  const name = typeof spec?.name === 'string' ? spec.name : '(unnamed)';
  const parsed = specSchema.safeParse(spec);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new JobDefinitionError(name, issue.path.join('.') || '(job)', issue.message);
  }
  const s = parsed.data;
  const grid = parseGrid(s.grid);
  if ('error' in grid) throw new JobDefinitionError(name, 'grid', grid.error);
  checkZone(name, 'timezone', s.timezone);
  const latenessMs = parseDuration(s.lateness)!;
  const tickZone = s.tick?.timezone ?? (s.tick ? s.timezone : 'UTC');
  checkZone(name, 'tick.timezone', tickZone);
  const tick: Tick = s.tick
    ? { kind: 'cron', cron: checkCron(name, s.tick.cron, tickZone), timezone: tickZone, derived: false }
    : defaultTick(grid, latenessMs);
  const retry = { ...DEFAULT_RETRY, ...s.retry };
  if (parseDuration(retry.maximumInterval)! < parseDuration(retry.initialInterval)!) {
    throw new JobDefinitionError(
      name,
      'retry.maximumInterval',
      'must not be shorter than retry.initialInterval',
    );
  }
  const clock = (t: string) => (t.length === 5 ? `${t}:00` : t);
  if (s.allowedHours && clock(s.allowedHours.from) === clock(s.allowedHours.to)) {
    // An empty range never opens: every window would wait for it forever, silently.
    throw new JobDefinitionError(
      name,
      'allowedHours',
      `from and to are both "${s.allowedHours.from}": the range would never open; leave allowedHours out to allow every hour`,
    );
  }
  const start = s.start === undefined ? undefined : new Date(s.start);
  if (start && !isAligned(grid, s.timezone, start)) {
    throw new JobDefinitionError(
      name,
      'start',
      `${start.toISOString()} is not a window boundary of grid "${grid.label}" in ${s.timezone}`,
    );
  }
  return Object.freeze({
    name: s.name,
    description: s.description ?? '',
    grid,
    timezone: s.timezone,
    latenessMs,
    maxCatchUp: s.maxCatchUp,
    start,
    tick: Object.freeze(tick),
    retry: Object.freeze(retry),
    attemptTimeoutMs: parseDuration(s.attemptTimeout)!,
    alerts: Object.freeze({ email: s.alerts.email, slack: s.alerts.slack, telegram: s.alerts.telegram }),
    lagThreshold: s.lagThreshold,
    effectTimeoutMs: parseDuration(s.effectTimeout)!,
    handler: s.handler as WindowHandler,
    prepare: s.prepare,
    settle: s.settle,
    heartbeatTimeoutMs: s.heartbeatTimeout === undefined ? undefined : parseDuration(s.heartbeatTimeout)!,
    allowedHours: s.allowedHours,
    seed: s.seed,
    writes:
      s.writes &&
      Object.freeze(
        s.writes.map((w) =>
          Object.freeze({
            table: w.table,
            key: [...w.key],
            ...(w.volatile ? { volatile: [...w.volatile] } : {}),
          }),
        ),
      ),
    noPreview: s.noPreview,
  });
}

export class UnknownJobError extends Error {
  readonly code = 'UNKNOWN_JOB';
  constructor(
    readonly job: string,
    known: readonly string[],
  ) {
    super(`unknown job "${job}"; the catalog has: ${known.join(', ') || '(none)'}`);
    this.name = 'UnknownJobError';
  }
}

/** What a catalog holds beside its jobs. */
export interface CatalogOptions {
  /** The catalog's own migrations (its tables), by name: run in name order, each once, after the ledger's. */
  readonly migrations?: CatalogMigrations;
  /**
   * Spread the derived ticks of more than TICKS_AT_ONCE jobs that would fire in the same second
   * (default true); false keeps every tick at its lateness.
   */
  readonly spreadTicks?: boolean;
}

const MIGRATION_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/;

function checkMigrations(migrations: unknown): CatalogMigrations {
  if (migrations === undefined) return Object.freeze({});
  if (typeof migrations !== 'object' || migrations === null || Array.isArray(migrations))
    throw new JobDefinitionError(
      '(catalog)',
      'migrations',
      "must be an object of migrations by name, e.g. { '2026-12-01_shop_tables': { up: async (db) => ... } }",
    );
  for (const [name, m] of Object.entries(migrations)) {
    if (!MIGRATION_NAME.test(name))
      throw new JobDefinitionError(
        '(catalog)',
        `migrations.${name}`,
        'a migration name is letters, digits, _, - and . (at most 200), starting with a letter or digit: they run in name order, so start it with a date, e.g. 2026-12-01_shop_tables',
      );
    if (typeof (m as CatalogMigration | null)?.up !== 'function')
      throw new JobDefinitionError(
        '(catalog)',
        `migrations.${name}`,
        'has no up(db) function: export async function up(db) { ... } from its module',
      );
  }
  return Object.freeze({ ...(migrations as CatalogMigrations) });
}

/** More jobs than this ticking in the same second have their ticks spread (spreadTicks). */
export const TICKS_AT_ONCE = 50;
/** The most a tick is moved by: a minute, and at most a fifth of its interval. */
const MAX_SPREAD_MS = 60_000;

/**
 * Seconds a group of `n` ticks is spread over: enough for about TICKS_AT_ONCE / 2 a second on
 * average (the most in one second stays under TICKS_AT_ONCE), as a power of two, so that a group
 * that doubles moves only half of its jobs (a hash modulo 2k is the same modulo k for half of them).
 */
function slotsFor(n: number): number {
  let slots = 1;
  while (slots * (TICKS_AT_ONCE / 2) < n) slots *= 2;
  return slots;
}

/** A stable number from a job's name (FNV-1a): the same second in every process. */
function nameHash(name: string): number {
  let h = 0x811c9dc5;
  for (const b of Buffer.from(name, 'utf8')) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h;
}

/**
 * Jobs whose derived ticks would fire in the same second, more than TICKS_AT_ONCE of them (a
 * thousand five-minute jobs: a thousand tick workflows at once, the Temporal server past a core and
 * windows done minutes late): each tick moved later by whole seconds, by a hash of the job's name,
 * over as many seconds as slotsFor says (4 for 100 jobs, 64 for 1,000), at most min(a minute, a
 * fifth of the interval). What it costs: a job's windows start up to that much later. A job's second
 * depends on its name and its group's size: a group that grows past a power of two (or shrinks back)
 * moves some of its ticks once, later or earlier (a window then waits at most one
 * interval, never lost). Cron ticks (the person chose the minute) and smaller groups are left alone.
 */
function spreadTicks(jobs: readonly Job[], spread: boolean): Job[] {
  // Grouped by the tick each would have unmoved: a catalog built again from spread jobs (the
  // housekeeping job added) spreads them to the same seconds, never twice.
  const baseOf = (t: Extract<Tick, { kind: 'interval' }>) =>
    (((t.offsetMs - (t.spreadMs ?? 0)) % t.everyMs) + t.everyMs) % t.everyMs;
  const keyOf = (t: Tick) => (t.kind === 'interval' && t.derived ? `${t.everyMs}/${baseOf(t)}` : null);
  const groups = new Map<string, number>();
  for (const j of jobs) {
    const k = keyOf(j.tick);
    if (k) groups.set(k, (groups.get(k) ?? 0) + 1);
  }
  return jobs.map((j) => {
    const k = keyOf(j.tick);
    if (!k || j.tick.kind !== 'interval') return j;
    const unmoved = { kind: j.tick.kind, everyMs: j.tick.everyMs, derived: j.tick.derived };
    const base = baseOf(j.tick);
    const slots = Math.min(
      Math.floor(Math.min(MAX_SPREAD_MS, j.tick.everyMs / 5) / 1000),
      slotsFor(groups.get(k)!),
    );
    const slot =
      spread && groups.get(k)! > TICKS_AT_ONCE && slots >= 2 ? (nameHash(j.name) % slots) * 1000 : 0;
    const tick = slot
      ? { ...unmoved, offsetMs: (base + slot) % j.tick.everyMs, spreadMs: slot }
      : { ...unmoved, offsetMs: base };
    if (tick.offsetMs === j.tick.offsetMs && (j.tick.spreadMs ?? 0) === slot) return j;
    return Object.freeze({ ...j, tick: Object.freeze(tick) });
  });
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a catalog holds jobs of any author's tables
export function defineCatalog(specs: readonly (JobSpec<any> | Job)[], options: CatalogOptions = {}): Catalog {
  const migrations = checkMigrations(options.migrations);
  const defined = specs.map((s) =>
    Object.isFrozen(s) && 'latenessMs' in s ? (s as Job) : defineJob(s as JobSpec),
  );
  const spread = options.spreadTicks !== false;
  const jobs = spreadTicks(defined, spread);
  const byName = new Map<string, Job>();
  for (const job of jobs) {
    if (byName.has(job.name))
      throw new JobDefinitionError(job.name, 'name', 'duplicate job name: each job is declared once');
    byName.set(job.name, job);
  }
  const names = [...byName.keys()];
  return Object.freeze({
    jobs: Object.freeze(jobs),
    migrations,
    spreadTicks: spread,
    has: (name: string) => byName.has(name),
    get(name: string): Job {
      const job = byName.get(name);
      if (!job) throw new UnknownJobError(name, names);
      return job;
    },
  });
}
