// The job contract: what a catalog entry declares, what a validated Job holds, and what its
// handler and its steps receive. schedules/define.ts validates a declaration into a Job.
import type { Kysely, Transaction } from 'kysely';
import type { EmailRequest, HttpRequest, SlackRequest, TelegramRequest } from '../contract/effects.js';
import type { EffectRow } from '../db/effects.js';
import type { Database, EffectPolicy } from '../db/schema.js';
import type { Grid, Window } from './windows.js';

// The job author's own kysely database type, unless they give theirs (defineJob<ShopDb>(...)).
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- untyped unless the author types it
type AnyDatabase = any;

/** A record a handler sets aside instead of applying it (ctx.quarantine). */
export interface QuarantineRecord {
  /** What identifies the record in its source (an order id): shown with the quarantine. */
  readonly key: string;
  /** Why it was set aside, for the person who looks at it. */
  readonly reason: string;
  /** The record as it was read (kept as JSON). */
  readonly payload?: unknown;
}

/**
 * What a handler receives: the window's open transaction and the window it must process. `DB` is
 * the job author's kysely database type (their tables), so `trx` is typed with their schema.
 */
export interface WindowContext<DB = AnyDatabase> {
  /**
   * The window's transaction for the job's own tables: the effect, its done marker and the
   * watermark commit together. Names resolve as the connection resolves them (the role's
   * search_path), never into tidemark's schema; naming a table's schema (`shop.orders`, or
   * `trx.withSchema('shop')`) is the surest.
   */
  readonly trx: Transaction<DB>;
  /**
   * The same transaction on tidemark's own tables (its schema): what the built-in job kinds keep
   * there (backups, their quarantine statements). A job of yours rarely needs it: use `quarantine`.
   */
  readonly ledger: Transaction<Database>;
  /**
   * Sets records aside in tidemark's quarantine with this window (shown by `tidemark quarantine`,
   * exported by housekeeping), in the window's transaction; count them in `quarantined`.
   */
  readonly quarantine: (records: readonly QuarantineRecord[]) => Promise<number>;
  /**
   * Aborted when this attempt is cancelled, times out or its worker shuts down: long work (a fetch,
   * a loop over pages) should stop and throw; the window's transaction then rolls back, and a
   * retry runs the window again. Pass it on: `fetch(url, { signal: ctx.signal })`.
   */
  readonly signal: AbortSignal;
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
 * `<window key>:<name>`. `policy` says what to do when its outcome is unknown; `retry`, how often
 * and how far apart a failed attempt is tried again (what it leaves out is the job's `retry`).
 */
export type WindowEffect =
  | {
      readonly name: string;
      readonly channel: 'email';
      readonly request: EmailRequest;
      readonly policy?: EffectPolicy;
      readonly retry?: EffectRetry;
    }
  | {
      readonly name: string;
      readonly channel: 'slack';
      readonly request: SlackRequest;
      readonly policy?: EffectPolicy;
      readonly retry?: EffectRetry;
    }
  | {
      readonly name: string;
      readonly channel: 'telegram';
      readonly request: TelegramRequest;
      readonly policy?: EffectPolicy;
      readonly retry?: EffectRetry;
    }
  | {
      readonly name: string;
      readonly channel: 'http';
      readonly request: HttpRequest;
      readonly policy?: EffectPolicy;
      readonly retry?: EffectRetry;
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
export type WindowHandler<DB = AnyDatabase> = (ctx: WindowContext<DB>) => Promise<WindowCounts>;

/**
 * A window's identity and database handles (no transaction) for the steps around its commit:
 * `db` for the job's own tables, its names resolved as `ctx.trx`'s are; `ledger` for tidemark's.
 */
export interface WindowScope<DB = AnyDatabase> {
  readonly db: Kysely<DB>;
  readonly ledger: Kysely<Database>;
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
export type WindowPreparer<DB = AnyDatabase> = (
  ctx: WindowScope<DB> & {
    readonly heartbeat: (details?: unknown) => void;
    readonly log: (line: string) => void;
  },
) => Promise<void>;

/**
 * After a window's effects ran: read what the providers answered (per-item results of a batch)
 * and record it, for example setting rejected items aside with their reason.
 */
export type WindowSettler<DB = AnyDatabase> = (
  ctx: WindowScope<DB> & { readonly effects: readonly EffectRow[] },
) => Promise<void>;

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

/** Optional one-time set-up of a job's own tables and demo data (run by `tidemark dev` for the demo catalog). */
export type JobSeeder = (db: Kysely<Database>, opts: { now: Date }) => Promise<void>;

/** An effect's own retry policy: each field it leaves out is the job's. */
export type EffectRetry = Partial<RetrySpec>;

export interface RetrySpec {
  readonly maximumAttempts: number;
  readonly initialInterval: string;
  readonly maximumInterval: string;
  readonly backoffCoefficient: number;
}

/** A job as a catalog entry declares it. Durations are short strings ("5m"). */
export interface JobSpec<DB = AnyDatabase> {
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
  /** Processes a window; `DB` types its `ctx.trx` with the job author's tables. */
  handler: WindowHandler<DB>;
  prepare?: WindowPreparer<DB>;
  settle?: WindowSettler<DB>;
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
      /** How much later than the lateness the catalog moved it (spreadTicks); absent: not moved. */
      readonly spreadMs?: number;
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

/**
 * A catalog's own migration: it creates or changes the job author's tables (a job's writes commit
 * in the window's transaction, so they live in the ledger's database). `up` gets the database as
 * the connection finds it: names resolve through the role's search_path, never into tidemark's
 * schema; a migration that names its schema (`create table shop.orders_daily ...`) is the surest.
 */
export interface CatalogMigration {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the author's own tables, untyped here
  up(db: Kysely<any>): Promise<void>;
}

/** A catalog's migrations by name; `tidemark migrate` runs them in name order, each once. */
export type CatalogMigrations = Readonly<Record<string, CatalogMigration>>;

/** The catalog: every job, validated, names unique. Built once per entry point. */
export interface Catalog {
  readonly jobs: readonly Job[];
  /** Its own migrations (none unless defineCatalog was given some), run after the ledger's. */
  readonly migrations: CatalogMigrations;
  /** Whether the ticks of many jobs on one derived tick are spread (defineCatalog's option). */
  readonly spreadTicks: boolean;
  get(name: string): Job;
  has(name: string): boolean;
}
