// Rerun requests and decisions, for every operator interface (CLI now; Slack and the page use
// the same functions): start a request, decide it through the workflow's Update, and keep a
// refused decision in the audit too (the workflow only sees accepted ones).
import {
  isGrpcDeadlineError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type Client,
} from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Config } from '../config/env.js';
import { directoryOf, requesterProblem } from '../config/people.js';
import type { Database } from '../db/schema.js';
import { parseDuration } from '../schedules/duration.js';
import type { Job } from '../schedules/job.js';
import { isAligned, windowAt } from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import { searchAttributes } from '../contract/search-attributes.js';
import type {
  DecisionActor,
  RerunDecision,
  RerunPreview,
  RerunResult,
  RerunState,
} from '../contract/workflows.js';
import { requestProof } from '../activities/decision-proof.js';

export class DecisionRefused extends Error {
  readonly code = 'DECISION_REFUSED';
}

/** The requester is nobody tidemark knows: a later approval could not be told from theirs. */
export class UnknownRequester extends Error {
  readonly code = 'UNKNOWN_REQUESTER';
}

/** The workers refused the request (the window was never processed, or a rerun of it is open). */
export class RequestRefused extends Error {
  readonly code = 'REQUEST_REFUSED';
}

/** No worker has recorded the request yet (none running?): it may still be, later. */
export class RequestNotRecorded extends Error {
  readonly code = 'REQUEST_NOT_RECORDED';
}

/** The time asked for is inside a window, not its start: refused before any workflow starts. */
export class NotAWindowStart extends Error {
  readonly code = 'NOT_A_WINDOW_START';
  constructor(
    readonly job: Job,
    readonly at: Date,
    readonly window: { start: Date; end: Date },
  ) {
    super(
      `${isoUtc(at)} is not the start of a window of ${job.name} (grid "${job.grid.label}" in ${job.timezone}); it lies in the window [${isoUtc(window.start)}, ${isoUtc(window.end)})`,
    );
  }
}

/** Why `at` cannot name a window of `job` (it lies inside one), or undefined when it is a window start. */
export function notAWindowStart(job: Job, at: Date): NotAWindowStart | undefined {
  return isAligned(job.grid, job.timezone, at)
    ? undefined
    : new NotAWindowStart(job, at, windowAt(job.grid, job.timezone, at));
}

/** The innermost message of a failure (Temporal wraps the activity's own error twice). */
function innermost(err: unknown): string {
  let e = err as Error;
  while (e.cause instanceof Error) e = e.cause;
  return e.message;
}

export async function requestRerun(
  client: Client,
  config: Config,
  r: {
    job: Job;
    windowStart: Date;
    reason: string;
    requestedBy: string;
    now: Date;
    /** Who asked, verified (the page's signed-in person): signed with TIDEMARK_DECISION_KEY for the workers. */
    requester?: DecisionActor;
  },
) {
  const directory = directoryOf(config);
  const problem = requesterProblem(directory, r.requestedBy);
  if (problem) throw new UnknownRequester(`rerun: ${problem}`);
  const misaligned = notAWindowStart(r.job, r.windowStart);
  if (misaligned) throw misaligned;
  const key = windowKey(r.job.name, r.windowStart);
  const workflowId = `${key}/rerun-${isoUtc(r.now)}`;
  const signing = config.TIDEMARK_DECISION_KEY;
  const asked =
    r.requester && signing
      ? {
          requester: r.requester,
          requestProof: requestProof(signing, {
            request: workflowId,
            job: r.job.name,
            windowStart: isoUtc(r.windowStart),
            reason: r.reason,
            requestedBy: r.requestedBy,
            timeoutMs: parseDuration(config.TIDEMARK_RERUN_TIMEOUT)!,
            actor: r.requester,
          }),
        }
      : {};
  const handle = await client.workflow.start('rerun', {
    taskQueue: config.TIDEMARK_TASK_QUEUE,
    workflowId,
    args: [
      {
        job: r.job.name,
        windowStart: isoUtc(r.windowStart),
        reason: r.reason,
        requestedBy: r.requestedBy,
        approvers: directory.approvers,
        allowSelfApproval: config.TIDEMARK_ALLOW_SELF_APPROVAL,
        timeoutMs: parseDuration(config.TIDEMARK_RERUN_TIMEOUT)!,
        ...(config.TIDEMARK_APPROVER_GROUP ? { approverGroup: config.TIDEMARK_APPROVER_GROUP } : {}),
        ...asked,
      },
    ],
    typedSearchAttributes: searchAttributes('rerun', r.job.name, {
      start: isoUtc(r.windowStart),
      generation: 0,
    }),
    staticSummary: `rerun request for ${key} by ${r.requestedBy}: ${r.reason}`,
  });
  return handle;
}

/**
 * Waits until the request has been recorded (its generation is known) and returns its state; a
 * request the workers refused is a RequestRefused with their reason.
 */
export async function requestState(
  client: Client,
  requestId: string,
  timeoutMs = 20_000,
): Promise<RerunState> {
  const handle = client.workflow.getHandle(requestId);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await handle.query<RerunState>('state').catch(() => undefined);
    // Recorded, and its preview computed (or given up on): the request as approvers see it.
    if ((state?.request && !state.previewing) || (state && state.status !== 'pending')) return state;
    const described = await handle.describe();
    if (described.status.name !== 'RUNNING')
      throw new RequestRefused(
        `rerun request ${requestId} ended (${described.status.name}): ${
          (await handle.result().then(() => 'without a request', innermost)) as string
        }`,
      );
    if (Date.now() > deadline)
      throw new RequestNotRecorded(
        `rerun request ${requestId} was not recorded in time (is a worker running?); see npx tidemark reruns`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * The run of the request's workflow that is open now, which a signed decision names (a request id
 * started again is another run); undefined when none is (decide() then says why).
 */
export async function openRun(client: Client, requestId: string): Promise<string | undefined> {
  const d = await client.workflow
    .getHandle(requestId)
    .describe()
    .catch(() => undefined);
  return d?.status.name === 'RUNNING' ? d.runId : undefined;
}

export async function decide(
  client: Client,
  db: Kysely<Database>,
  requestId: string,
  d: RerunDecision,
  /** The run the decision was signed for; the decision goes to it alone. */
  runId?: string,
): Promise<void> {
  const refuse = async (reason: string): Promise<never> => {
    await db
      .insertInto('approval_audit')
      .values({
        request: requestId,
        actor: d.by,
        decision: d.decision,
        accepted: false,
        reason,
        source: d.source,
        ...(d.actor
          ? { subject: d.actor.subject, display_name: d.actor.displayName, credential: d.actor.credential }
          : {}),
      })
      .execute();
    throw new DecisionRefused(`${d.decision} by ${d.by} refused: ${reason}`);
  };
  try {
    await client.workflow.getHandle(requestId, runId).executeUpdate('decide', { args: [d] });
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError)
      return await refuse((err.cause as Error | undefined)?.message ?? err.message);
    if (!(err instanceof WorkflowNotFoundError)) throw err;
    // Its workflow has closed (timed out, decided, ended) or never was: a refusal like any other.
    const row = await db
      .selectFrom('rerun_requests')
      .select('status')
      .where('workflow_id', '=', requestId)
      .executeTakeFirst();
    await refuse(
      !row
        ? `there is no open rerun request ${requestId} (see npx tidemark reruns)`
        : `the request ${row.status === 'timed-out' ? 'timed out' : row.status === 'pending' ? 'ended without a decision' : `is ${row.status}`}: it takes no decision now (ask again with npx tidemark rerun)`,
    );
  }
}

/**
 * What a rerun of the window would change, computed by a worker (it has the job's handler and
 * the database) without requesting anything: no generation is reserved, nothing is recorded.
 */
export async function previewRerun(
  client: Client,
  config: Config,
  r: { job: Job; windowStart: Date; now: Date },
): Promise<RerunPreview> {
  const misaligned = notAWindowStart(r.job, r.windowStart);
  if (misaligned) throw misaligned;
  const key = windowKey(r.job.name, r.windowStart);
  try {
    return (await client.workflow.execute('rerunPreview', {
      taskQueue: config.TIDEMARK_TASK_QUEUE,
      workflowId: `${key}/preview-${isoUtc(r.now)}`,
      args: [{ job: r.job.name, windowStart: isoUtc(r.windowStart), timeoutMs: r.job.attemptTimeoutMs }],
      // A worker that is down fails the preview rather than leaving the caller waiting for ever.
      workflowExecutionTimeout: Math.max(60_000, 4 * r.job.attemptTimeoutMs),
      staticSummary: `rerun preview of ${key}`,
    })) as RerunPreview;
  } catch (err) {
    throw new RequestRefused(`preview of ${key}: ${innermost(err)}`);
  }
}

/** A rerun request waiting for a decision, with what approving it would change. */
export interface PendingApproval {
  readonly request: string;
  readonly job: string;
  readonly windowStart: string;
  readonly generation: number;
  readonly requestedBy: string;
  readonly requestedAt: string;
  readonly reason: string;
  /** Null: none yet (being computed, or could not be computed: previewNote says why). */
  readonly preview: RerunPreview | null;
  readonly previewNote: string | null;
  readonly previewing: boolean;
}

/** How long one request's state may take to answer before the list shows it without a preview. */
const STATE_QUERY_MS = 3_000;

/** Pending rerun requests, oldest first, each with its preview from its workflow's state query. */
export async function pendingApprovals(client: Client, db: Kysely<Database>): Promise<PendingApproval[]> {
  const rows = await db
    .selectFrom('rerun_requests')
    .selectAll()
    .where('status', '=', 'pending')
    .orderBy('requested_at')
    .limit(50)
    .execute();
  const listed = await Promise.all(
    rows.map(async (r) => {
      // A deadline, not a race with a timer: the call ends with it (its retries too), so none is
      // left running after the list is returned, nor on the connection when the process stops.
      const state = await client
        .withDeadline(Date.now() + STATE_QUERY_MS, () =>
          client.workflow.getHandle(r.workflow_id).query<RerunState>('state'),
        )
        .catch((err: unknown) =>
          isGrpcDeadlineError(err) ? 'no worker answered (is one running?)' : (err as Error).message,
        );
      const known = typeof state === 'string' ? null : state;
      return {
        request: r.workflow_id,
        job: r.job,
        windowStart: isoUtc(r.window_start),
        generation: r.generation,
        requestedBy: r.requested_by,
        requestedAt: isoUtc(r.requested_at),
        reason: r.reason,
        preview: known?.preview ?? null,
        previewNote: typeof state === 'string' ? state : (known?.previewNote ?? null),
        previewing: known?.previewing ?? false,
        decided: known !== null && known.status !== 'pending',
      };
    }),
  );
  // Decided a moment ago (its workflow knows; its row says so once the workflow has settled it).
  return listed.filter((a) => !a.decided).map(({ decided: _, ...a }) => a);
}

export async function rerunResult(client: Client, requestId: string): Promise<RerunResult> {
  return (await client.workflow.getHandle(requestId).result()) as RerunResult;
}
