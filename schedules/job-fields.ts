// The fields of a job definition (JobSpec in schedules/job.ts, validated by schedules/define.ts), one
// row each: scripts/docs-reference.ts writes docs/reference/job.md from them. Typed by JobSpec's keys,
// so a field added to the contract without a row here (or a row for a field that is gone) does not
// compile; test/unit/docs-reference.test.ts checks the defaults against what defineJob fills in.
import type { JobSpec, RetrySpec } from './job.js';

export interface JobFieldDoc {
  /** The field's type as a catalog entry writes it. */
  readonly type: string;
  /** Whether a definition must give it. */
  readonly required?: true;
  /** What defineJob fills in when it is left out. */
  readonly default?: string;
  readonly description: string;
}

export const JOB_FIELDS = {
  name: {
    type: 'string',
    required: true,
    description:
      "The job's name: 1-63 lowercase letters, digits and dashes, starting with a letter; unique in the catalog. Window keys, schedules and metrics carry it.",
  },
  description: {
    type: 'string',
    default: '""',
    description: 'What the job does, in words, shown with it on the page.',
  },
  grid: {
    type: 'string',
    required: true,
    description:
      'The windows: "5m", "1h", "1d" (fixed, aligned to the UTC epoch) or "day", "week", "month" (calendar, from local midnight in `timezone`).',
  },
  timezone: {
    type: 'string',
    default: '"UTC"',
    description: 'IANA time zone of calendar grids, of `allowedHours` and of a declared `tick`.',
  },
  lateness: {
    type: 'duration',
    default: '"0m"',
    description: 'How long after a window closes it is processed, so late records still land in it.',
  },
  maxCatchUp: {
    type: 'integer ≥ 1',
    default: '24',
    description:
      'New windows started per tick at most; the rest wait for the next tick (failed windows retry apart).',
  },
  start: {
    type: 'ISO-8601 instant',
    default: 'the latest closed window when the job is first seen',
    description: "The first window's start; it must be a window boundary of the grid.",
  },
  tick: {
    type: '{ cron: string; timezone?: string }',
    default:
      'derived from the grid and lateness (to the second); past 50 jobs on one such tick, each moved later by whole seconds, by its name, over what it takes to start about 25 a second (at most a minute and a fifth of the interval)',
    description:
      'When the tick fires: a 5-field cron (restricting day-of-month or day-of-week, not both) in `tick.timezone`, else `timezone`.',
  },
  retry: {
    type: '{ maximumAttempts?, initialInterval?, maximumInterval?, backoffCoefficient? }',
    default: 'see [Retry](#retry)',
    description:
      "How often and how far apart a failed window attempt is tried again; each field it leaves out is the default's.",
  },
  attemptTimeout: {
    type: 'duration',
    default: '"10m"',
    description: 'Start-to-close limit of one attempt at a window.',
  },
  alerts: {
    type: '{ email?: string[]; slack?: string[]; telegram?: string[] }',
    default: 'TIDEMARK_ALERT_EMAIL, TIDEMARK_ALERT_SLACK, TIDEMARK_ALERT_TELEGRAM',
    description:
      "Who hears about the job's failures, lag and findings: e-mail addresses, Slack channels, Telegram chat ids.",
  },
  lagThreshold: {
    type: 'integer ≥ 1',
    default: '3',
    description: 'The lag watch alerts when the watermark is more than this many windows behind.',
  },
  effectTimeout: {
    type: 'duration',
    default: '"1m"',
    description: "Start-to-close limit of one attempt at an external effect (also its begin marker's lease).",
  },
  handler: {
    type: '(ctx: WindowContext) => Promise<WindowCounts>',
    required: true,
    description:
      "Processes one window in the window's transaction (`ctx.trx`) and returns its counts (input = applied + quarantined) and effects; it must not commit or open another connection.",
  },
  prepare: {
    type: '(ctx) => Promise<void>',
    description:
      "Long work before the window's transaction, committing its own checkpoints and calling `ctx.heartbeat()` after each chunk; an attempt that dies resumes where the last stopped.",
  },
  settle: {
    type: '(ctx) => Promise<void>',
    description:
      "After the window's effects ran: reads what the providers answered (`ctx.effects`) and records it.",
  },
  heartbeatTimeout: {
    type: 'duration',
    description:
      'An attempt that stops heartbeating for this long is retried elsewhere (jobs with `prepare`).',
  },
  allowedHours: {
    type: '{ from: "HH:MM[:SS]"; to: "HH:MM[:SS]" }',
    default: 'every hour',
    description:
      'Local time range in `timezone` in which windows may run, e.g. `{ from: "01:00", to: "05:00" }`; from and to must differ.',
  },
  seed: {
    type: '(db, { now }) => Promise<void>',
    description:
      "One-time set-up of the job's own tables and demo data (run by `tidemark dev` for the demo catalog).",
  },
  writes: {
    type: '{ table: string; key: string[]; volatile?: string[] }[]',
    description:
      "Tables the handler writes and the columns that identify a row, for the rerun preview's before and after; `volatile` columns change at every run and are not compared. Absent: the preview lists effects only.",
  },
  noPreview: {
    type: 'string',
    description:
      'Why the rerun preview must not run this handler at all (it acts outside its transaction: writes files, dumps a database).',
  },
} as const satisfies { readonly [K in keyof Required<JobSpec>]: JobFieldDoc };

/** The fields of `retry` (RetrySpec), with the defaults schedules/define.ts fills in. */
export const RETRY_FIELDS = {
  maximumAttempts: {
    type: 'integer ≥ 1',
    default: '5',
    description: 'Attempts at a window, the first included, before it counts as failed.',
  },
  initialInterval: {
    type: 'duration > 0',
    default: '"1s"',
    description: 'The wait before the first retry.',
  },
  maximumInterval: {
    type: 'duration > 0',
    default: '"1m"',
    description: 'The longest wait between retries; not shorter than `initialInterval`.',
  },
  backoffCoefficient: {
    type: 'number ≥ 1',
    default: '2',
    description: 'Each wait is the previous one times this.',
  },
} as const satisfies { readonly [K in keyof RetrySpec]: JobFieldDoc };
