// The job contract: what a catalog entry declares, and its validation into a frozen Job.
// A bad definition is refused here, before anything runs, with the job and field named.
import { Cron } from 'croner';
import { IANAZone } from 'luxon';
import { z } from 'zod';
import type { Kysely, Transaction } from 'kysely';
import type { EmailRequest, HttpRequest, SlackRequest, TelegramRequest } from '../contract/effects.js';
import type { EffectRow } from '../db/effects.js';
import type { Database, EffectPolicy } from '../db/schema.js';
import { formatDuration, parseDuration } from './duration.js';
import { isAligned, parseGrid, type Grid, type Window } from './windows.js';

/** What a handler receives: the open ledger transaction and the window it must process. */
export interface WindowContext {
  readonly trx: Transaction<Database>;
  readonly job: Job;
  readonly window: Window;
  readonly key: string;
  readonly generation: number;
  readonly attempt: number;
  /** A log line through the worker's logger (secrets redacted). */
  readonly log: (line: string) => void;
  /**
   * The bulk path: COPY `rows` (arrays of values in `columns` order) into `table` inside this
   * transaction, at COPY's speed; returns how many. Into the target table when the window owns
   * its rows, or into a temporary table (created with `trx`, `on commit drop`) followed by one
   * set-based statement that merges them. Null becomes NULL, a Date its ISO instant, an object JSON.
   */
  readonly copyRows: (
    table: string,
    columns: readonly string[],
    rows: Iterable<readonly unknown[]>,
  ) => Promise<number>;
}

/**
 * An external effect of a window (a report e-mail, a chat message), recorded in the window's
 * transaction and performed after it commits through the effect guard, keyed
 * `<window key>:<name>`. `policy` says what to do when its outcome is unknown.
 */
export type WindowEffect =
  | {
      readonly name: string;
      readonly channel: 'email';
      readonly request: EmailRequest;
      readonly policy?: EffectPolicy;
    }
  | {
      readonly name: string;
      readonly channel: 'slack';
      readonly request: SlackRequest;
      readonly policy?: EffectPolicy;
    }
  | {
      readonly name: string;
      readonly channel: 'telegram';
      readonly request: TelegramRequest;
      readonly policy?: EffectPolicy;
    }
  | {
      readonly name: string;
      readonly channel: 'http';
      readonly request: HttpRequest;
      readonly policy?: EffectPolicy;
    };

/** What a handler reports; applied + quarantined must equal input. */
export interface WindowCounts {
  readonly input: number;
  readonly applied: number;
  readonly quarantined: number;
  readonly effects?: readonly WindowEffect[];
  /** What the run did, in words and numbers, kept with the window's run record. */
  readonly details?: Readonly<Record<string, unknown>>;
  /** Findings a person must hear about although the window committed (a reconciliation mismatch). */
  readonly findings?: readonly { readonly subject: string; readonly message: string }[];
  /**
   * Open incidents of the job this window's commit closes, with a recovery notice (a backup
   * window whose restore drill passed closes the incident a failed on-demand drill opened).
   */
  readonly recovered?: readonly { readonly subject: string; readonly note: string }[];
}

/** Processes one window inside the ledger transaction. It must not commit or open another connection. */
export type WindowHandler = (ctx: WindowContext) => Promise<WindowCounts>;

/** A window's identity and a database handle (no transaction) for the steps around its commit. */
export interface WindowScope {
  readonly db: Kysely<Database>;
  readonly job: Job;
  readonly window: Window;
  readonly key: string;
  readonly generation: number;
}

/**
 * Long work before a window's transaction (a nightly batch in chunks): it commits its own
 * checkpoints, so an attempt that dies resumes where the last one stopped, and calls
 * `heartbeat` after each chunk so a dead worker is noticed quickly. The handler then folds its
 * results in with the window's done marker.
 */
export type WindowPreparer = (
  ctx: WindowScope & {
    readonly heartbeat: (details?: unknown) => void;
    readonly log: (line: string) => void;
  },
) => Promise<void>;

/**
 * After a window's effects ran: read what the providers answered (per-item results of a batch)
 * and record it, for example setting rejected items aside with their reason.
 */
export type WindowSettler = (ctx: WindowScope & { readonly effects: readonly EffectRow[] }) => Promise<void>;

/**
 * A table a job's handler writes, and the columns that identify one of its rows: the rerun
 * preview shows its rows before and after the handler. Key columns named `job`, `window_start`
 * or `window_key` narrow the rows compared to the job's (or the window's).
 */
export interface TableWrite {
  readonly table: string;
  readonly key: readonly string[];
  /**
   * Columns the handler sets to a new value at every run (a clock_timestamp(), a random id): left
   * out of the comparison, or no preview computed again would ever match the one approved.
   */
  readonly volatile?: readonly string[];
}

/** Optional one-time set-up of a job's own tables and demo data (run by `npm start`). */
export type JobSeeder = (db: Kysely<Database>, opts: { now: Date }) => Promise<void>;

export interface RetrySpec {
  readonly maximumAttempts: number;
  readonly initialInterval: string;
  readonly maximumInterval: string;
  readonly backoffCoefficient: number;
}

/** A job as a catalog entry declares it. Durations are short strings ("5m"). */
export interface JobSpec {
  name: string;
  description?: string;
  /** "5m", "1h", "1d" (UTC epoch-aligned) or "day", "week", "month" (local midnight in `timezone`). */
  grid: string;
  /** IANA time zone of calendar grids and of the default tick; default "UTC". */
  timezone?: string;
  /** How long after a window closes it is processed, so late records still land in it; default "0m". */
  lateness?: string;
  /** New windows started per tick at most; the rest wait for the next tick (failed windows retry apart). Default 24. */
  maxCatchUp?: number;
  /** First window's start (ISO-8601). Default: the latest closed window when the job is first seen. */
  start?: string;
  /** When the tick fires: 5-field cron in `timezone` (default UTC); default derived from the grid (to the second). */
  tick?: { cron: string; timezone?: string };
  retry?: Partial<RetrySpec>;
  /** Start-to-close limit of one attempt at a window; default "10m". */
  attemptTimeout?: string;
  alerts?: { email?: string[]; slack?: string[]; telegram?: string[] };
  /** The watch alerts when the watermark is more than this many windows behind; default 3. */
  lagThreshold?: number;
  /** Start-to-close limit of one attempt at an external effect (also its begin marker's lease); default "1m". */
  effectTimeout?: string;
  handler: WindowHandler;
  prepare?: WindowPreparer;
  settle?: WindowSettler;
  /** An attempt that stops heartbeating for this long is retried elsewhere (jobs with `prepare`). */
  heartbeatTimeout?: string;
  /** Local time range in which windows may run, e.g. { from: '01:00', to: '05:00' } in `timezone`. */
  allowedHours?: { from: string; to: string };
  seed?: JobSeeder;
  /**
   * Tables the handler writes, for the rerun preview's before and after. Absent: the preview runs
   * the handler all the same and lists its effects only (it cannot know which rows to compare).
   */
  writes?: readonly TableWrite[];
  /**
   * Why the rerun preview must not run this handler at all: it acts outside its transaction
   * (writes files, dumps a database, clears a cache), which no rollback would undo.
   */
  noPreview?: string;
}

/**
 * When a job's tick fires: a declared 5-field cron in a zone, or (derived from the grid) every
 * `everyMs` from the UTC epoch at `offsetMs` past each multiple, to the second.
 */
export type Tick =
  | { readonly kind: 'cron'; readonly cron: string; readonly timezone: string; readonly derived: false }
  | {
      readonly kind: 'interval';
      readonly everyMs: number;
      readonly offsetMs: number;
      readonly derived: true;
    };

/** A validated job, frozen. */
export interface Job {
  readonly name: string;
  readonly description: string;
  readonly grid: Grid;
  readonly timezone: string;
  readonly latenessMs: number;
  readonly maxCatchUp: number;
  readonly start: Date | undefined;
  readonly tick: Tick;
  readonly retry: RetrySpec;
  readonly attemptTimeoutMs: number;
  readonly alerts: {
    readonly email: readonly string[];
    readonly slack: readonly string[];
    readonly telegram: readonly string[];
  };
  readonly lagThreshold: number;
  readonly effectTimeoutMs: number;
  readonly handler: WindowHandler;
  readonly prepare: WindowPreparer | undefined;
  readonly settle: WindowSettler | undefined;
  readonly heartbeatTimeoutMs: number | undefined;
  readonly allowedHours: { readonly from: string; readonly to: string } | undefined;
  readonly seed: JobSeeder | undefined;
  readonly writes: readonly TableWrite[] | undefined;
  readonly noPreview: string | undefined;
}

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
        initialInterval: durationText.optional(),
        maximumInterval: durationText.optional(),
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
export function defineJob(spec: JobSpec): Job {
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
    handler: s.handler,
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

/** The catalog: every job, validated, names unique. Built once per entry point. */
export interface Catalog {
  readonly jobs: readonly Job[];
  get(name: string): Job;
  has(name: string): boolean;
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

export function defineCatalog(specs: readonly (JobSpec | Job)[]): Catalog {
  const jobs = specs.map((s) =>
    Object.isFrozen(s) && 'latenessMs' in s ? (s as Job) : defineJob(s as JobSpec),
  );
  const byName = new Map<string, Job>();
  for (const job of jobs) {
    if (byName.has(job.name))
      throw new JobDefinitionError(job.name, 'name', 'duplicate job name: each job is declared once');
    byName.set(job.name, job);
  }
  const names = [...byName.keys()];
  return Object.freeze({
    jobs: Object.freeze(jobs),
    has: (name: string) => byName.has(name),
    get(name: string): Job {
      const job = byName.get(name);
      if (!job) throw new UnknownJobError(name, names);
      return job;
    },
  });
}
