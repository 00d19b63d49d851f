// Table types of the ledger and of the demo jobs' tables, as kysely sees them.
import type { ColumnType, Generated } from 'kysely';
import type { RetryPolicyDto } from '../contract/workflows.js';

type Timestamp = ColumnType<Date, Date | string, Date | string>;
type CreatedAt = ColumnType<Date, Date | string | undefined, never>;

export const WINDOW_STATUS = Object.freeze({ done: 'done', failed: 'failed' } as const);
export type WindowStatus = (typeof WINDOW_STATUS)[keyof typeof WINDOW_STATUS];

export const RUN_KIND = Object.freeze({
  tick: 'tick',
  window: 'window',
  backfill: 'backfill',
  rerun: 'rerun',
} as const);
export type RunKind = (typeof RUN_KIND)[keyof typeof RUN_KIND];

/** Per job: the end of the contiguous run of done windows. Only moves forward. */
export interface JobWatermarkTable {
  job: string;
  watermark: Timestamp;
  updated_at: Timestamp;
}

/** Per window and generation: where it stands. The `done` row is the window's idempotency marker. */
export interface JobWindowTable {
  job: string;
  window_start: Timestamp;
  generation: ColumnType<number, number | undefined, number>;
  window_end: Timestamp;
  window_key: string;
  status: WindowStatus;
  attempts: ColumnType<number, number | undefined, number>;
  trigger: string;
  workflow_id: string | null;
  started_at: Timestamp;
  finished_at: Timestamp | null;
  duration_ms: number | null;
  reason: string | null;
  records_in: number | null;
  records_applied: number | null;
  records_quarantined: number | null;
}

/** Every tick, window attempt, backfill and rerun, kept after Temporal's retention drops it. */
export interface JobRunTable {
  id: Generated<string>;
  kind: RunKind;
  job: string;
  window_start: Timestamp | null;
  generation: number | null;
  workflow_id: string | null;
  attempt: number | null;
  started_at: Timestamp;
  finished_at: Timestamp;
  duration_ms: number;
  outcome: string;
  reason: string | null;
  details: ColumnType<unknown, string | undefined, string>;
}

/** Records a handler set aside, with the reason; applied + quarantined = input. */
export interface QuarantineTable {
  id: Generated<string>;
  job: string;
  window_start: Timestamp;
  generation: number;
  record_key: string;
  reason: string;
  payload: ColumnType<unknown, string | undefined, string>;
  created_at: CreatedAt;
}

/** Demo source: orders as they land. `amount` may be missing or negative in bad records. */
export interface OrderTable {
  order_key: string;
  placed_at: Timestamp;
  amount: ColumnType<string | null, string | number | null, string | number | null>;
}

/** Demo target: per job and local day, the orders and their total. */
export interface DailySalesTable {
  job: string;
  day: ColumnType<string, string, string>;
  order_count: ColumnType<number, number, number>;
  total: ColumnType<string, string | number, string | number>;
}

export const EFFECT_STATUS = Object.freeze({
  pending: 'pending',
  begun: 'begun',
  done: 'done',
  unknown: 'unknown',
  failed: 'failed',
  skipped: 'skipped',
} as const);
export type EffectStatus = (typeof EFFECT_STATUS)[keyof typeof EFFECT_STATUS];

/** What to do when an effect's outcome is unknown (a begin without a done, or a lost reply). */
export const EFFECT_POLICY = Object.freeze({ ask: 'ask', resend: 'resend', skip: 'skip' } as const);
export type EffectPolicy = (typeof EFFECT_POLICY)[keyof typeof EFFECT_POLICY];

/** One external effect: its request (replayable, never a secret), markers and fencing number. */
export interface EffectTable {
  effect_key: string;
  job: string;
  window_key: string | null;
  name: string;
  channel: string;
  policy: EffectPolicy;
  /** The effect's own retry policy (null: the job's). */
  retry: ColumnType<RetryPolicyDto | null, string | null | undefined, string | null>;
  status: EffectStatus;
  fence: ColumnType<number, number | undefined, number>;
  attempts: ColumnType<number, number | undefined, number>;
  request: ColumnType<unknown, string, string>;
  provider_key: string;
  provider_id: string | null;
  lease_until: Timestamp | null;
  last_error: string | null;
  created_at: CreatedAt;
  begun_at: Timestamp | null;
  done_at: Timestamp | null;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
  decision: 'resend' | 'skip' | null;
  decided_by: string | null;
  decided_at: Timestamp | null;
  /** What the provider answered, where it says more than an id (per-item results of a batch). */
  result: ColumnType<unknown, string | null | undefined, string | null>;
}

export interface EffectAttemptTable {
  id: Generated<string>;
  effect_key: string;
  fence: number;
  started_at: Timestamp;
  finished_at: Timestamp;
  duration_ms: number;
  outcome: string;
  provider_id: string | null;
  error: string | null;
}

/** A failure that is alerted once when it opens and noticed once when it clears. */
export interface IncidentTable {
  id: Generated<string>;
  job: string;
  subject: string;
  kind: string;
  opened_at: CreatedAt;
  closed_at: Timestamp | null;
  occurrences: ColumnType<number, number | undefined, number>;
  last_error: string;
  details: ColumnType<unknown, string | undefined, string>;
}

export interface RawEventTable {
  id: Generated<string>;
  occurred_at: Timestamp;
  kind: string;
  value: ColumnType<string, string | number, string | number>;
}
export interface DailyEventStatsTable {
  job: string;
  day: string;
  kind: string;
  events: number;
  total: ColumnType<string, string | number, string | number>;
}
export interface BatchCheckpointTable {
  window_key: string;
  chunk: number;
  rows: number;
  committed_at: CreatedAt;
}
export interface BatchPartialTable {
  window_key: string;
  chunk: number;
  day: string;
  kind: string;
  events: number;
  total: ColumnType<string, string | number, string | number>;
}

export interface PriceUpdateTable {
  id: Generated<string>;
  sku: string;
  price: ColumnType<string, string | number, string | number>;
  stock: number;
  effective_at: Timestamp;
}
export interface MarketplaceItemTable {
  marketplace: string;
  sku: string;
  version: Timestamp;
  price: ColumnType<string, string | number, string | number>;
  stock: number;
  window_key: string;
  status: 'pending' | 'applied' | 'rejected';
  reason: string | null;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

export interface BackupTable {
  job: string;
  window_key: string;
  window_start: Timestamp;
  destination: string;
  object_key: string;
  bytes: number;
  sha256: string;
  encrypted: boolean;
  table_counts: ColumnType<unknown, string, string>;
  restore_checked: boolean;
  created_at: CreatedAt;
  deleted_at: Timestamp | null;
  /** The id of the key an encrypted backup was written with; null for plain ones and older backups. */
  key_id: string | null;
  /** When the dump's snapshot was taken; null for backups made before it was recorded. */
  dumped_at: Timestamp | null;
}

export interface BackupCheckTable {
  id: Generated<string>;
  job: string;
  window_key: string;
  kind: 'verify' | 'drill';
  /** Who asked: cli, page, schedule (a window's drill). */
  trigger: string;
  ok: boolean;
  detail: string;
  duration_ms: number;
  at: CreatedAt;
}

export interface RerunRequestTable {
  workflow_id: string;
  job: string;
  window_start: Timestamp;
  generation: number;
  reason: string;
  requested_by: string;
  requested_at: CreatedAt;
  status: 'pending' | 'approved' | 'rejected' | 'timed-out' | 'done' | 'failed';
  decided_by: string | null;
  decided_at: Timestamp | null;
  note: string | null;
  /** The workflow run that recorded it; null: recorded before runs were kept. */
  run_id?: string | null;
}
export interface ApprovalAuditTable {
  id: Generated<string>;
  request: string;
  actor: string;
  decision: string;
  accepted: boolean;
  reason: string | null;
  source: string;
  at: CreatedAt;
  /** The identity provider's subject of who decided; null: not verified (single-user mode, older rows). */
  subject?: string | null;
  display_name?: string | null;
  /** The session or personal token (its id, never its secret) the decision came through. */
  credential?: string | null;
}
export interface WebSessionTable {
  id: string;
  csrf: string;
  subject: string;
  name: string;
  display_name: string;
  roles: string[];
  verified: boolean;
  created_at: CreatedAt;
  expires_at: Timestamp;
}
export interface WebLoginTable {
  state: string;
  verifier: string;
  nonce: string;
  expires_at: Timestamp;
}
export interface WebActionTable {
  id: Generated<string>;
  at: CreatedAt;
  /** The route: "POST /api/jobs/:job/rerun". */
  action: string;
  job: string | null;
  /** What it acted on: a rerun request's id, a window's start, an effect's key. */
  target: string | null;
  actor: string;
  subject: string;
  display_name: string;
  credential: string;
  verified: boolean;
}
export interface ApiTokenTable {
  id: string;
  hash: string;
  label: string;
  subject: string;
  name: string;
  display_name: string;
  roles: string[];
  created_at: CreatedAt;
  expires_at: Timestamp;
  revoked_at: Timestamp | null;
  last_used_at: Timestamp | null;
}
export interface SalesWindowTotalTable {
  job: string;
  window_start: Timestamp;
  generation: number;
  day: string;
  order_count: number;
  total: ColumnType<string, string | number, string | number>;
}

/** An alert delivery recorded in a window's transaction (a finding, a recovery notice). */
export interface WindowNoticeTable {
  window_key: string;
  effect_key: string;
  created_at: CreatedAt;
}

/** Starts of a window run's local attempts (migration 20261130T2300). */
export interface LocalWindowAttemptTable {
  window_key: string;
  run_id: string;
  starts: number;
}

/** Per housekeeping window and table: the batches run and rows removed so far. */
export interface HousekeepingProgressTable {
  window_key: string;
  tbl: string;
  batches: ColumnType<number, number | undefined, number>;
  rows: ColumnType<string, number | string | undefined, number | string>;
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>;
}

/** A chain of contiguous done generation-0 windows folded into one row (migration 20261201T1000). */
export interface JobDoneSpanTable {
  job: string;
  span_start: Timestamp;
  span_end: Timestamp;
  compacted_at: CreatedAt;
}

/**
 * Delta rows of the windows of a job by the status of their latest generation, kept by a trigger
 * on job_windows (migration 20261201T2000); a job's count is the sum of its rows.
 */
export interface JobWindowCountTable {
  id: Generated<string>;
  job: string;
  status: string;
  n: ColumnType<string, number | string, number | string>;
}

/** Spans added (sign 1) or removed (-1) that the counts do not hold yet (migration 20261201T2300): counted by the job's grid. */
export interface JobSpanBacklogTable {
  id: Generated<string>;
  job: string;
  span_start: Date;
  span_end: Date;
  /** 1: a span added, -1: one removed. */
  sign: number;
}

/** Delta rows of the effects by status and channel, kept by a trigger on effects (migration 20261201T2000). */
export interface EffectCountTable {
  id: Generated<string>;
  status: string;
  channel: string;
  n: ColumnType<string, number | string, number | string>;
}

export interface Database {
  job_watermarks: JobWatermarkTable;
  job_windows: JobWindowTable;
  job_runs: JobRunTable;
  quarantine: QuarantineTable;
  orders: OrderTable;
  daily_sales: DailySalesTable;
  effects: EffectTable;
  effect_attempts: EffectAttemptTable;
  incidents: IncidentTable;
  raw_events: RawEventTable;
  daily_event_stats: DailyEventStatsTable;
  batch_checkpoints: BatchCheckpointTable;
  batch_partials: BatchPartialTable;
  price_updates: PriceUpdateTable;
  marketplace_items: MarketplaceItemTable;
  backups: BackupTable;
  backup_checks: BackupCheckTable;
  rerun_requests: RerunRequestTable;
  approval_audit: ApprovalAuditTable;
  web_sessions: WebSessionTable;
  web_logins: WebLoginTable;
  api_tokens: ApiTokenTable;
  web_actions: WebActionTable;
  sales_window_totals: SalesWindowTotalTable;
  window_notices: WindowNoticeTable;
  local_window_attempts: LocalWindowAttemptTable;
  housekeeping_progress: HousekeepingProgressTable;
  job_done_spans: JobDoneSpanTable;
  job_window_counts: JobWindowCountTable;
  job_span_backlog: JobSpanBacklogTable;
  effect_counts: EffectCountTable;
}
