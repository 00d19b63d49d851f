// Reruns: the request (a new generation of a completed window), the audit of every decision,
// and the request's final state. The only way a completed window runs again.
import { WorkflowNotFoundError } from '@temporalio/client';
import { sql } from 'kysely';
import { recordEffects } from '../db/effects.js';
import { expandWindow } from '../db/compaction.js';
import { isDone } from '../db/ledger.js';
import { ledger } from '../db/ledger-schema.js';
import type { SlackRequest } from '../contract/effects.js';
import { isDecisionProof, isRequestProof, type DecisionClaim } from './decision-proof.js';
import { isGroupProof, type GroupClaim } from './group-proof.js';
import { isAligned, windowAt } from '../schedules/windows.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import type { ApprovalPolicy, DecisionActor, RerunRequest } from '../contract/workflows.js';
import { policyOf, type ActivityDeps } from './deps.js';
import { FAILURE } from '../contract/failures.js';
import { badInput } from './errors.js';
import { jobOrFail } from './plan.js';

export function rerunActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  /** Has this request's workflow ended? Unknown (no Temporal client here) counts as running. */
  async function workflowEnded(workflowId: string): Promise<boolean> {
    const client = deps.temporal?.client;
    if (!client) return false;
    try {
      return (await client.workflow.getHandle(workflowId).describe()).status.name !== 'RUNNING';
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return true;
      throw err;
    }
  }
  /**
   * How an open request whose workflow has ended settles, or null while it still holds the window
   * (approved, and its generation's run, abandoned by the ended workflow, is still going).
   */
  async function endedRequest(open: {
    job: string;
    window_start: Date;
    generation: number;
    status: string;
  }): Promise<{ status: 'done' | 'failed'; note: string } | null> {
    if (open.status === 'pending') return { status: 'failed', note: 'its workflow ended before a decision' };
    if (await isDone(db, { job: open.job, start: open.window_start, generation: open.generation }))
      return {
        status: 'done',
        note: `its workflow ended after the approval; generation ${open.generation} ran`,
      };
    if (!(await workflowEnded(windowKey(open.job, open.window_start, open.generation)))) return null;
    return {
      status: 'failed',
      note: `its workflow ended after the approval; generation ${open.generation} did not complete`,
    };
  }
  return {
    /**
     * Records a rerun request and reserves the next generation of a done window; the same request
     * twice is one, and a second open request for the window is refused.
     */
    async requestRerun(input: {
      job: string;
      windowStart: string;
      reason: string;
      requestedBy: string;
      workflowId: string;
      requester?: DecisionActor;
      requestProof?: string;
      /** The run recording it (absent from histories before runs were kept). */
      run?: string;
      timeoutMs?: number;
    }): Promise<RerunRequest> {
      const job = jobOrFail(deps, input.job);
      // Workers that take only signed decisions take only signed requests: who asked is who the
      // page says, not what a Temporal client writes (else one could ask as another, then approve).
      const key = deps.approvals?.decisionKey;
      if (deps.approvals?.policy?.requireProof) {
        const signed =
          !!key &&
          !!input.requester &&
          !!input.requestProof &&
          isRequestProof(
            key,
            {
              request: input.workflowId,
              job: input.job,
              windowStart: input.windowStart,
              reason: input.reason,
              requestedBy: input.requestedBy,
              timeoutMs: input.timeoutMs ?? null,
              actor: input.requester,
            },
            input.requestProof,
          );
        if (!signed)
          throw badInput(
            FAILURE.badWindow,
            `a rerun request in the name of ${input.requestedBy} carries no valid signature of the page: ask on the page signed in, or with the CLI signed in (npx tidemark login)`,
          );
      }
      const start = new Date(input.windowStart);
      if (Number.isNaN(start.getTime()) || !isAligned(job.grid, job.timezone, start)) {
        throw badInput(
          FAILURE.badWindow,
          `"${input.windowStart}" is not the start of a window of ${job.name} (grid "${job.grid.label}" in ${job.timezone})${
            Number.isNaN(start.getTime())
              ? ''
              : `; it lies in the window starting ${isoUtc(windowAt(job.grid, job.timezone, start).start)}`
          }`,
        );
      }
      const existing = await db
        .selectFrom('rerun_requests')
        .selectAll()
        .where('workflow_id', '=', input.workflowId)
        .executeTakeFirst();
      // An id is one request: the same request recorded again (an overlapping attempt) is that
      // request, but an id whose request has closed, or that names another window, is refused (a
      // workflow started again under it would otherwise skip every check below).
      if (
        existing &&
        (existing.status !== 'pending' ||
          existing.job !== job.name ||
          existing.window_start.getTime() !== start.getTime() ||
          // Recorded by another run of the id: the request was ended and started again by a client.
          (input.run !== undefined && !!existing.run_id && existing.run_id !== input.run))
      )
        throw badInput(
          FAILURE.badWindow,
          `rerun request id ${input.workflowId} was used by an earlier request (${existing.job} ${isoUtc(existing.window_start)}, ${existing.status}): ask again, under a new id (npx tidemark rerun)`,
        );
      let generation = existing?.generation;
      if (generation === undefined) {
        // The request reserves its generation: one transaction per window (an advisory lock keyed
        // by it) sees every earlier request, refuses a second open one, and takes the number after
        // every generation already run or reserved. A partial unique index backs the refusal.
        const key = windowKey(job.name, start);
        generation = await db.transaction().execute(async (trx) => {
          await sql`select pg_advisory_xact_lock(hashtext(${`rerun:${key}`}))`.execute(trx);
          const open = await trx
            .selectFrom('rerun_requests')
            .select(['workflow_id', 'job', 'window_start', 'generation', 'status', 'requested_by'])
            .where('job', '=', job.name)
            .where('window_start', '=', start)
            .where('status', 'in', ['pending', 'approved'])
            .executeTakeFirst();
          // This very request, recorded by an overlapping attempt of this activity: the same request.
          if (open?.workflow_id === input.workflowId) return open.generation;
          const ended = open && (await workflowEnded(open.workflow_id)) ? await endedRequest(open) : null;
          if (ended) {
            // Its workflow was terminated (or timed out): it holds the window no longer.
            await trx
              .updateTable('rerun_requests')
              .set(ended)
              .where('workflow_id', '=', open!.workflow_id)
              .execute();
            logger.warn(
              `RERUN request ${open!.workflow_id} was ${open!.status} but ${ended.note}: settled as ${ended.status}`,
            );
          } else if (open)
            throw badInput(
              FAILURE.badWindow,
              `a rerun of ${key} is already open: ${open.workflow_id} (generation ${open.generation}, ${open.status}, asked by ${open.requested_by}); decide it first (npx tidemark approve|reject ${open.workflow_id}) or wait until it has run, then ask again`,
            );
          // A window whose marker was folded into a span gets it back first (split out of the span).
          await expandWindow(trx, {
            job: job.name,
            start,
            end: windowAt(job.grid, job.timezone, start).end,
            key,
          });
          const t = ledger(trx);
          const r = await sql<{ done: boolean | null; next: number }>`
            select (select bool_or(generation = 0 and status = 'done') from ${t.job_windows}
                     where job = ${job.name} and window_start = ${start}) as done,
                   greatest(
                     (select coalesce(max(generation), 0) from ${t.job_windows} where job = ${job.name} and window_start = ${start}),
                     (select coalesce(max(generation), 0) from ${t.rerun_requests} where job = ${job.name} and window_start = ${start})
                   ) + 1 as next`.execute(trx);
          if (!r.rows[0]?.done)
            throw badInput(
              FAILURE.badWindow,
              `window ${key} has not been processed: nothing to rerun (a tick or a backfill will process it)`,
            );
          const next = r.rows[0].next;
          await trx
            .insertInto('rerun_requests')
            .values({
              workflow_id: input.workflowId,
              job: job.name,
              window_start: start,
              generation: next,
              reason: input.reason,
              requested_by: input.requestedBy,
              status: 'pending',
              ...(input.run ? { run_id: input.run } : {}),
            })
            .execute();
          return next;
        });
        logger.info(
          `RERUN requested job=${job.name} window=${key} generation=${generation} by=${input.requestedBy}: ${input.reason}`,
        );
      }
      const w = windowAt(job.grid, job.timezone, start);
      const effects = await db
        .selectFrom('effects')
        .select('name')
        .where('window_key', 'like', `${windowKey(job.name, start)}%`)
        .where('status', '=', 'done')
        .execute();
      return {
        window: {
          job: job.name,
          start: isoUtc(w.start),
          end: isoUtc(w.end),
          generation,
          key: windowKey(job.name, start, generation),
        },
        policy: policyOf(job),
        repeats: [...new Set(effects.map((e) => e.name))],
      };
    },

    /**
     * The Slack message of a request: first with Approve / Reject buttons, later updated in place
     * with the decision and the result. Returns the effect keys to deliver (none without a channel).
     */
    async noticeRerun(input: {
      request: string;
      event: 'requested' | 'decided' | 'finished';
      text: string;
    }): Promise<string[]> {
      const channel = deps.approvals?.slackChannel;
      if (!channel) return [];
      const base = `rerun:${input.request}:slack`;
      const section = { type: 'section', text: { type: 'mrkdwn', text: input.text } };
      let request: SlackRequest;
      if (input.event === 'requested') {
        request = {
          channel,
          text: input.text,
          blocks: [
            section,
            {
              type: 'actions',
              block_id: 'rerun',
              elements: [
                {
                  type: 'button',
                  action_id: 'rerun_approve',
                  style: 'primary',
                  text: { type: 'plain_text', text: 'Approve' },
                  value: input.request,
                },
                {
                  type: 'button',
                  action_id: 'rerun_reject',
                  style: 'danger',
                  text: { type: 'plain_text', text: 'Reject' },
                  value: input.request,
                },
              ],
            },
          ],
        };
      } else {
        const first = await db
          .selectFrom('effects')
          .select('provider_id')
          .where('effect_key', '=', `${base}-requested`)
          .executeTakeFirst();
        request = {
          channel,
          text: input.text,
          blocks: [section],
          ...(first?.provider_id ? { ts: first.provider_id } : {}),
        };
      }
      const key = `${base}-${input.event}`;
      await recordEffects(db, [
        {
          key,
          job: '_system',
          windowKey: null,
          name: `rerun-${input.event}`,
          channel: 'slack',
          policy: 'skip',
          request,
          providerKey: key,
        },
      ]);
      return [key];
    },

    /** Is this the Slack app's proof that the person is in the approver group? */
    /** Who may decide reruns, as this worker is configured; null: a worker given no rule (tests). */
    async approvalPolicy(): Promise<ApprovalPolicy | null> {
      return deps.approvals?.policy ?? null;
    },

    async verifyGroupClaim(input: GroupClaim & { proof: string }): Promise<boolean> {
      const secret = deps.approvals?.groupProofSecret;
      if (!secret) {
        logger.warn(
          `APPROVAL request=${input.request}: ${input.by} decided as a member of ${input.group}, but this worker has no SLACK_SIGNING_SECRET to check it: refused`,
        );
        return false;
      }
      return isGroupProof(secret, input, input.proof);
    },

    /** Is this decision signed by the page or the Slack app (TIDEMARK_DECISION_KEY)? */
    async verifyDecision(input: DecisionClaim & { proof: string }): Promise<boolean> {
      const key = deps.approvals?.decisionKey;
      if (!key) return false;
      const ok = isDecisionProof(key, input, input.proof);
      if (!ok)
        logger.warn(
          `APPROVAL request=${input.request}: a ${input.decision} in the name of ${input.by} (${input.source}) carries no valid signature of the page or the Slack app: refused`,
        );
      return ok;
    },

    async auditDecision(input: {
      request: string;
      actor: string;
      decision: string;
      accepted: boolean;
      reason?: string | null;
      source: string;
      /** Who, verified (the page's session or token, the Slack app's user): absent when not. */
      subject?: string;
      displayName?: string;
      credential?: string;
    }): Promise<void> {
      const { subject, displayName, credential, ...rest } = input;
      await db
        .insertInto('approval_audit')
        .values({
          ...rest,
          reason: input.reason ?? null,
          ...(subject ? { subject, display_name: displayName ?? null, credential: credential ?? null } : {}),
        })
        .execute();
      logger.info(
        `APPROVAL request=${input.request} actor=${input.actor} decision=${input.decision} ${input.accepted ? 'accepted' : `refused: ${input.reason}`}`,
      );
    },

    async settleRerun(input: {
      request: string;
      status: 'approved' | 'rejected' | 'timed-out' | 'done' | 'failed';
      decidedBy?: string | null;
      note?: string | null;
    }): Promise<void> {
      await db
        .updateTable('rerun_requests')
        .set({
          status: input.status,
          ...(input.decidedBy ? { decided_by: input.decidedBy, decided_at: deps.now() } : {}),
          ...(input.note ? { note: input.note } : {}),
        })
        .where('workflow_id', '=', input.request)
        .execute();
    },
  };
}
