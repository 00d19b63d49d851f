// Reruns: the request (a new generation of a completed window), the audit of every decision,
// and the request's final state. The only way a completed window runs again.
import { sql } from 'kysely';
import { recordEffects } from '../db/effects.js';
import type { SlackRequest } from './notify/provider.js';
import { isAligned, isoUtc, windowAt, windowKey } from '../schedules/windows.js';
import type { RerunRequest } from '../workflows/types.js';
import { policyOf, type ActivityDeps } from './deps.js';
import { FAILURE, badInput } from './errors.js';
import { jobOrFail } from './plan.js';

export function rerunActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  return {
    /** Records a rerun request for the next generation of a done window; the same request twice is one. */
    async requestRerun(input: {
      job: string;
      windowStart: string;
      reason: string;
      requestedBy: string;
      workflowId: string;
    }): Promise<RerunRequest> {
      const job = jobOrFail(deps, input.job);
      const start = new Date(input.windowStart);
      if (Number.isNaN(start.getTime()) || !isAligned(job.grid, job.timezone, start)) {
        throw badInput(
          FAILURE.badWindow,
          `"${input.windowStart}" is not the start of a window of ${job.name} (grid "${job.grid.label}" in ${job.timezone})`,
        );
      }
      const existing = await db
        .selectFrom('rerun_requests')
        .selectAll()
        .where('workflow_id', '=', input.workflowId)
        .executeTakeFirst();
      let generation = existing?.generation;
      if (generation === undefined) {
        const r = await sql<{ done: boolean; next: number }>`
          select bool_or(generation = 0 and status = 'done') as done, coalesce(max(generation), 0) + 1 as next
            from job_windows where job = ${job.name} and window_start = ${start}`.execute(db);
        if (!r.rows[0]?.done)
          throw badInput(
            FAILURE.badWindow,
            `window ${windowKey(job.name, start)} has not been processed: nothing to rerun (a tick or a backfill will process it)`,
          );
        generation = r.rows[0].next;
        await db
          .insertInto('rerun_requests')
          .values({
            workflow_id: input.workflowId,
            job: job.name,
            window_start: start,
            generation,
            reason: input.reason,
            requested_by: input.requestedBy,
            status: 'pending',
          })
          .onConflict((oc) => oc.column('workflow_id').doNothing())
          .execute();
        logger.info(
          `RERUN requested job=${job.name} window=${windowKey(job.name, start)} generation=${generation} by=${input.requestedBy}: ${input.reason}`,
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

    async auditDecision(input: {
      request: string;
      actor: string;
      decision: string;
      accepted: boolean;
      reason?: string | null;
      source: string;
    }): Promise<void> {
      await db
        .insertInto('approval_audit')
        .values({ ...input, reason: input.reason ?? null })
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
