// Workflow contracts: one input and one result type per workflow, plain JSON (no Date, no secrets).
// A workflow's function name is its persisted type: renaming one is a migration.

/** How an activity retries: a job's `retry` with its defaults, or an effect's own over it. */
export interface RetryPolicyDto {
  readonly maximumAttempts: number;
  readonly initialInterval: string;
  readonly maximumInterval: string;
  readonly backoffCoefficient: number;
}

/** How a window's activity retries and how long one attempt may take, from the job's definition. */
export interface ActivityPolicy {
  readonly retry: RetryPolicyDto;
  readonly startToCloseTimeoutMs: number;
  /** Start-to-close limit of one attempt at one of the window's external effects. */
  readonly effectTimeoutMs?: number;
  /** Set for jobs that heartbeat (long, chunked work). */
  readonly heartbeatTimeoutMs?: number;
  /** The job reads its effects' answers after they ran (settleWindow). */
  readonly settles?: boolean;
  /** The local time range in which the window may run; the workflow waits for it. */
  readonly allowedHours?: { readonly from: string; readonly to: string; readonly timezone: string };
}

/** One window of one job, times as ISO-8601 UTC. */
export interface WindowSpec {
  readonly job: string;
  readonly start: string;
  readonly end: string;
  readonly generation: number;
  /** `<job>/<start>` (plus `#<generation>` for reruns): the workflow id and the effects' key. */
  readonly key: string;
}

export const TRIGGER = Object.freeze({
  schedule: 'schedule',
  backfill: 'backfill',
  manual: 'manual',
  rerun: 'rerun',
} as const);
export type Trigger = (typeof TRIGGER)[keyof typeof TRIGGER];

export interface TickInput {
  readonly job: string;
  /** The tick's "now" (ISO); default: the schedule's nominal time, else the workflow's start time. */
  readonly now?: string;
}

export interface TickPlan {
  readonly job: string;
  readonly now: string;
  readonly watermark: string;
  /** Closed windows not yet done, oldest first, at most the job's catch-up cap. */
  readonly windows: readonly WindowSpec[];
  /** Closed windows past the watermark that were already done (for example by a backfill). */
  readonly alreadyDone: number;
  readonly policy: ActivityPolicy;
  /** Recovery notices to deliver: an earlier tick of this job had failed. */
  readonly recovery?: readonly string[];
}

export interface TickResult {
  readonly job: string;
  readonly now: string;
  readonly watermark: string;
  readonly started: readonly string[];
  readonly running: readonly string[];
  readonly alreadyDone: number;
}

/**
 * The window workflow's code shape its starter asks for, in its input so that the run's own history
 * says which shape it took without a patch marker (a patch also upserts TemporalChangeVersion, a
 * visibility write, on every run). 1: the activity local where the job allows it, the alerts recorded
 * with the commit. 2: as 1, and an attempt timeout over 10 minutes runs as a regular activity
 * (workflows/policy.ts LOCAL_MAX_MS). Without it, the run decides by patch markers, as runs started
 * before it did.
 */
export const WINDOW_REVISION = 2;

export interface WindowInput extends WindowSpec {
  readonly trigger: Trigger;
  readonly policy: ActivityPolicy;
  /** WINDOW_REVISION when started; absent in runs started before it existed. */
  readonly revision?: number;
  /**
   * The Temporal server's time when the workflow called the activity (its workflow clock, set by
   * the workflow): a window closed by it is closed, whatever the worker's own clock says.
   */
  readonly asOf?: string;
  /**
   * An approved rerun: the digest of the preview its approver saw. The run commits only if its
   * own change has that digest (the data may move between the approval and the run).
   */
  readonly approved?: string;
  /**
   * A batched backfill processed the window in its batch: this run drives its effects and alerts,
   * and says so (its window's outcome was logged once, by the batch).
   */
  readonly afterBatch?: boolean;
}

export interface WindowCountsDto {
  readonly input: number;
  readonly applied: number;
  readonly quarantined: number;
}

export interface WindowResult {
  readonly key: string;
  readonly outcome: 'processed' | 'already-done';
  readonly counts: WindowCountsDto | null;
  readonly watermark: string | null;
  /** Keys of the window's external effects not yet done: the workflow drives them next. */
  readonly effects?: readonly string[];
  /** The retry policy of those effects that have one of their own, by key (the others: the job's). */
  readonly effectRetry?: Readonly<Record<string, RetryPolicyDto>>;
  /** Recovery notices to deliver (results of runs that started before `alerts` existed). */
  readonly recovery?: readonly string[];
  /** Findings of the handler that alert although the window committed (already raised in its transaction). */
  readonly findings?: readonly { readonly subject: string; readonly message: string }[];
  /**
   * Alert deliveries recorded with the window's commit (its recovery notice, its findings'
   * alerts); on the already-done path, those of them not delivered yet.
   */
  readonly alerts?: readonly string[];
}

/** How each of a window's external effects ended in this run. */
export interface EffectOutcomeDto {
  readonly key: string;
  readonly outcome: 'done' | 'already-done' | 'unknown' | 'skipped' | 'failed';
  readonly error: string | null;
}

/** What the window workflow returns: the window's result and its effects' outcomes. */
export interface WindowRunResult extends WindowResult {
  readonly effectOutcomes: readonly EffectOutcomeDto[];
}

export interface BackfillTotals {
  processed: number;
  alreadyDone: number;
  running: number;
  failed: string[];
}

export interface BackfillInput {
  readonly job: string;
  /** Windows whose start lies in [from, to) are processed (ISO instants). */
  readonly from: string;
  readonly to: string;
  /** Windows run at once; default 8. */
  readonly concurrency?: number;
  /** Windows planned per run before the workflow continues as new; default 500 (batched: see backfill.ts). */
  readonly pageSize?: number;
  /**
   * Consecutive windows per activity (each still in its own transaction); unset: one window
   * workflow per window.
   */
  readonly batch?: number;
  /** Set by the workflow itself when it continues as new. */
  readonly cursor?: string;
  readonly totals?: BackfillTotals;
  readonly startedAt?: string;
}

export interface BackfillPage {
  readonly windows: readonly WindowSpec[];
  readonly alreadyDone: number;
  /** Where the next page starts, when there is one. */
  readonly next: string | null;
  readonly policy: ActivityPolicy;
}

export interface BackfillResult extends BackfillTotals {
  readonly job: string;
  readonly from: string;
  readonly to: string;
}

export interface BackfillProgress extends BackfillTotals {
  readonly cursor: string;
  readonly inFlight: number;
  /** Windows per batch, when batched. */
  readonly batch?: number;
}

/** The most windows one batch activity takes (its input and heartbeat stay small). */
export const MAX_BATCH = 1_000;
/**
 * The most windows (or batches) a backfill runs at once: each is a lane in the backfill's workflow
 * code, and ten million of them time its workflow task out on every try (a backfill stuck silently).
 */
export const MAX_CONCURRENCY = 1_000;

export interface BatchInput {
  readonly job: string;
  /** Consecutive windows of the job, oldest first. */
  readonly windows: readonly WindowSpec[];
  readonly policy: ActivityPolicy;
  readonly trigger: Trigger;
  /** The Temporal server's time when the batch was called (see WindowInput.asOf). */
  readonly asOf?: string;
}

export interface BatchOutcome {
  readonly key: string;
  /** `not-run`: the batch stopped before it (a window outlived its attempt timeout). */
  readonly outcome: 'processed' | 'already-done' | 'failed' | 'not-run';
  /** The window has effects or alerts to drive: its window workflow does that. */
  readonly followUp?: true;
  readonly error?: string;
}

export interface BatchResult {
  readonly outcomes: readonly BatchOutcome[];
  /** Set when the job cannot be batched (the reason): its windows run one workflow each. */
  readonly perWindow?: string;
}

/**
 * Who may decide reruns, as the workers' own configuration says (TIDEMARK_APPROVERS,
 * TIDEMARK_APPROVER_GROUP, TIDEMARK_ALLOW_SELF_APPROVAL), read when a decision arrives.
 */
export interface ApprovalPolicy {
  readonly approvers: readonly string[];
  readonly approverGroup?: string;
  readonly allowSelfApproval: boolean;
  /**
   * The worker holds TIDEMARK_DECISION_KEY: a decision counts only with the page's or the Slack
   * app's signature over it (activities/decision-proof.ts), never on a bare name.
   */
  readonly requireProof?: boolean;
}

/** Who made a decision, as the page or the Slack app verified them (signed with the decision). */
export interface DecisionActor {
  /** The identity provider's subject (slack:<user id> for a Slack user). */
  readonly subject: string;
  readonly displayName: string;
  /** Their roles when they decided (contract/roles.ts): an approver by role needs no name in TIDEMARK_APPROVERS. */
  readonly roles: readonly string[];
  /** The session or personal token it came through (an id, never a secret). */
  readonly credential: string;
}

export interface RerunInput {
  readonly job: string;
  /** Start of the completed window to run again (ISO). */
  readonly windowStart: string;
  readonly reason: string;
  readonly requestedBy: string;
  /**
   * Names of who may approve (config/people.ts) as the requester's process saw them: shown with the
   * request. What decides is the workers' own rule (ApprovalPolicy), read when a decision arrives;
   * this is the rule only for runs started before that, and for workers given none.
   */
  readonly approvers: readonly string[];
  /** A Slack user group whose members may decide too (membership is checked by the Slack app). */
  readonly approverGroup?: string;
  /** May the requester approve their own request? Default no. */
  readonly allowSelfApproval?: boolean;
  /** How long to wait for a decision; default 24 hours. */
  readonly timeoutMs?: number;
  /** Who asked, verified by the page (signed in); worth nothing without requestProof. */
  readonly requester?: DecisionActor;
  /** The page's signature over the request and who asked (activities/decision-proof.ts). */
  readonly requestProof?: string;
}

export interface RerunRequest {
  readonly window: WindowSpec;
  readonly policy: ActivityPolicy;
  /** Effects that ran for this window before and will run again for the new generation. */
  readonly repeats: readonly string[];
}

export interface RerunDecision {
  readonly decision: 'approve' | 'reject';
  readonly by: string;
  readonly note?: string;
  /** Where the decision was made: cli, slack, web. */
  readonly source: string;
  /** The digest of the preview the approver saw; absent: the one the request shows now. */
  readonly previewDigest?: string;
  /** Set by the Slack app when it found the user in this user group; worth nothing without groupProof. */
  readonly viaGroup?: string;
  /** The Slack app's proof of the membership (activities/group-proof.ts), checked by a worker. */
  readonly groupProof?: string;
  /** Who decided, verified by the page or the Slack app; worth nothing without `proof`. */
  readonly actor?: DecisionActor;
  /** Their signature over the decision and the actor (activities/decision-proof.ts), checked by a worker. */
  readonly proof?: string;
}

export interface RerunState {
  readonly status: 'pending' | 'approved' | 'rejected' | 'timed-out' | 'done' | 'failed';
  readonly request: RerunRequest | null;
  readonly decidedBy: string | null;
  /** What approving would change (requests made before previews existed have none). */
  readonly preview?: RerunPreview | null;
  /** Why there is no preview (it could not be computed). */
  readonly previewNote?: string;
  /** The preview is being computed (approvals wait for it). */
  readonly previewing?: boolean;
}

export interface RerunResult {
  readonly outcome: 'done' | 'rejected' | 'timed-out';
  readonly generation: number;
  readonly decidedBy: string | null;
  readonly window: WindowRunResult | null;
}

/** One row a rerun would add, remove or change, by its key; values as PostgreSQL prints them. */
export interface PreviewRow {
  readonly change: 'added' | 'removed' | 'changed';
  readonly key: Readonly<Record<string, string | null>>;
  readonly before: Readonly<Record<string, string | null>> | null;
  readonly after: Readonly<Record<string, string | null>> | null;
  /** Columns past the listed ones that change too (a wide row lists PREVIEW_COLUMNS). */
  readonly more?: number;
}

/** A declared table's difference: counts of every change, and the first rows of it. */
export interface PreviewTable {
  readonly table: string;
  readonly key: readonly string[];
  readonly added: number;
  readonly removed: number;
  readonly changed: number;
  /** Of every changed row (the unlisted ones too): two previews with one fingerprint change the same. */
  readonly fingerprint: string;
  /** At most PREVIEW_ROWS, changed first, each kind by key. */
  readonly rows: readonly PreviewRow[];
  /** Set when the table held too many of the job's rows to compare (their count): no diff. */
  readonly tooLarge?: number;
}

/**
 * What a rerun would change, computed by running the handler for the new generation in a
 * transaction that was rolled back. `digest` covers the change only (not when it was computed):
 * an approval applies only while a fresh preview has the same digest.
 */
export interface RerunPreview {
  readonly job: string;
  readonly windowStart: string;
  readonly windowEnd: string;
  readonly generation: number;
  /** The generation whose contribution the rerun replaces (the newest done one). */
  readonly previous: number;
  /** The worker's clock when the handler ran. */
  readonly computedAt: string;
  /** ok: computed; failed: the handler failed (the rerun would too); refused: not previewable. */
  readonly outcome: 'ok' | 'failed' | 'refused';
  /** Why it failed or was refused (secrets redacted). */
  readonly note?: string;
  readonly counts?: { readonly input: number; readonly applied: number; readonly quarantined: number };
  /** Null when the job declares no tables it writes (the preview then lists effects only). */
  readonly tables: readonly PreviewTable[] | null;
  /** External effects: sent before and produced again, new with this generation, not produced again. */
  readonly effects: {
    readonly repeat: readonly string[];
    readonly added: readonly string[];
    readonly dropped: readonly string[];
  };
  readonly findings: readonly string[];
  readonly digest: string;
}

export interface PreviewInput {
  readonly job: string;
  readonly windowStart: string;
  /** The reserved generation of a request; absent: the one a request made now would get. */
  readonly generation?: number;
}
