// rerun: asks for approval to run a completed window again, as a new generation whose effects
// replace the earlier ones. The decision is an Update with a validator (who may decide, once);
// rejected and timed-out are results, not failures.
import {
  ApplicationFailure,
  condition,
  defineQuery,
  defineUpdate,
  executeChild,
  proxyActivities,
  ParentClosePolicy,
  patched,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import { deliver } from './alerts.js';
import { bookkeeping } from './policy.js';
import { hasRole } from '../contract/roles.js';
import { searchAttributes } from '../contract/search-attributes.js';
import { slackEscape } from '../contract/slack-text.js';
import {
  WINDOW_REVISION,
  type RerunDecision,
  type RerunInput,
  type RerunRequest,
  type RerunResult,
  type PreviewInput,
  type RerunPreview,
  type RerunState,
  type WindowRunResult,
  type ApprovalPolicy,
} from '../contract/workflows.js';
import { window } from './window.js';
import { BAD_INPUT, DECISION_FAILURE } from '../contract/failures.js';
import { previewLines, slackPreview } from '../contract/preview-text.js';

export const decideRerun = defineUpdate<
  { accepted: true; decision: RerunDecision['decision'] },
  [RerunDecision]
>('decide');
export const rerunState = defineQuery<RerunState>('state');

const DAY_MS = 86_400_000;

/**
 * The audit of an accepted decision is written before the decision applies, inside the Update:
 * briefly retried, so a person waits seconds, not minutes, to hear it could not be recorded.
 */
const recording = proxyActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 3, initialInterval: '500ms', maximumInterval: '2s' },
});

/** The preview runs the job's handler: it gets the job's attempt timeout, and a few attempts. */
function previewing(timeoutMs: number) {
  return proxyActivities<Activities>({
    startToCloseTimeout: timeoutMs,
    retry: {
      maximumAttempts: 3,
      initialInterval: '1s',
      maximumInterval: '5s',
      nonRetryableErrorTypes: [...BAD_INPUT],
    },
  });
}

/** The preview alone, for `tidemark rerun --preview` and the page: nothing is requested or reserved. */
export async function rerunPreview(input: PreviewInput & { timeoutMs: number }): Promise<RerunPreview> {
  const { timeoutMs, ...what } = input;
  return await previewing(timeoutMs).previewWindow(what);
}

/** The activity's own error behind Temporal's wrapper. */
function causeOf(err: unknown): string {
  const e = err as Error;
  return e.cause instanceof Error ? e.cause.message : e.message;
}

export async function rerun(input: RerunInput): Promise<RerunResult> {
  const { workflowId } = workflowInfo();
  let status: RerunState['status'] = 'pending';
  let request: RerunRequest | null = null;
  let decision: RerunDecision | undefined;
  /** A decision accepted by the validator whose audit is being written: nobody else may decide meanwhile. */
  let deciding: RerunDecision | undefined;
  /** Set the moment the wait for a decision timed out: later decisions are refused. */
  let closed = false;
  /** What approving would change, computed once the request is recorded, and again at each approval. */
  let preview: RerunPreview | null = null;
  let previewNote: string | undefined;
  let previewingNow = false;
  /** The digest of the change approved (checked against the data at the approval). */
  let approvedChange: string | undefined;
  /**
   * What a Slack approver was shown: the request's message carries the first preview; a refusal
   * tells its decider the new one. A Slack click names no preview, so it approves that one.
   */
  let inMessage: string | undefined;
  const shownTo = new Map<string, string>();
  /** Signatures this run has been sent: one signature, one try (a refused one read from the history opens nothing later). */
  const proofsSeen = new Set<string>();
  setHandler(rerunState, () => ({
    status,
    request,
    decidedBy: decision?.by ?? null,
    preview,
    ...(previewNote ? { previewNote } : {}),
    previewing: previewingNow,
  }));
  /** The rule a request carries: the rule of runs started before the workers' own was read. */
  const requestRule: ApprovalPolicy = {
    approvers: input.approvers,
    ...(input.approverGroup ? { approverGroup: input.approverGroup } : {}),
    allowSelfApproval: input.allowSelfApproval ?? false,
  };
  /** Does this decision stand only on membership of the approver group? */
  const needsGroup = (d: RerunDecision, rule: ApprovalPolicy = requestRule, byRole = false) =>
    !byRole && !rule.approvers.includes(d.by) && !(d.by === input.requestedBy && d.decision === 'reject');
  const whoMay = (rule: ApprovalPolicy = requestRule) => {
    const who = [
      ...(rule.approvers.length ? [`approvers: ${rule.approvers.join(', ')}`] : []),
      ...(rule.approverGroup ? [`or members of ${rule.approverGroup}`] : []),
    ];
    return who.length ? ` (${who.join(' ')})` : ' (no approvers are configured)';
  };
  /**
   * Refuses `d` under `rule`: the requester approving their own request unless allowed, anyone but
   * an approver (or a member of the approver group, whose proof is checked after) deciding.
   */
  const refuseUnder = (rule: ApprovalPolicy, d: RerunDecision, byRole = false, verified = false): void => {
    const refuse = (why: string) => {
      throw ApplicationFailure.nonRetryable(why, DECISION_FAILURE.notAnApprover);
    };
    // The same person by name, or (both verified) by the identity provider's subject.
    const asker =
      d.by === input.requestedBy ||
      (verified && !!input.requester && d.actor?.subject === input.requester.subject);
    if (asker && d.decision === 'approve' && !rule.allowSelfApproval)
      refuse(`${d.by} asked for this rerun and may not approve it`);
    if (
      needsGroup(d, rule, byRole) &&
      !(rule.approverGroup && d.viaGroup === rule.approverGroup && d.groupProof)
    )
      refuse(`${d.by} may not decide reruns${whoMay(rule)}`);
  };
  /**
   * Is `d` signed by the page or the Slack app? Checked by a worker (it holds the key); a decision
   * with no signature is not looked at.
   */
  const signedBy = async (d: RerunDecision): Promise<boolean> =>
    !!d.actor &&
    !!d.proof &&
    (await recording.verifyDecision({
      request: workflowId,
      // This run: a signature made for an earlier run of the same request id opens nothing here.
      run: workflowInfo().runId,
      decision: d.decision,
      by: d.by,
      source: d.source,
      actor: d.actor,
      ...(d.previewDigest !== undefined ? { previewDigest: d.previewDigest } : {}),
      ...(d.note !== undefined ? { note: d.note } : {}),
      proof: d.proof,
    }));
  /** A worker checks the Slack app's proof: a Temporal client cannot claim membership. */
  const vouchedFor = (d: RerunDecision) =>
    recording.verifyGroupClaim({
      request: workflowId,
      by: d.by,
      decision: d.decision,
      group: d.viaGroup ?? '',
      proof: d.groupProof ?? '',
    });
  setHandler(
    decideRerun,
    async (d) => {
      if (!patched('issue8-audit-first')) {
        // Histories from before the audit came first: the decision applied at once, then its audit.
        decision = d;
        await bookkeeping.auditDecision({
          request: workflowId,
          actor: d.by,
          decision: d.decision,
          accepted: true,
          reason: d.note ?? null,
          source: d.source,
        });
        return { accepted: true, decision: d.decision };
      }
      deciding = d;
      let verified = false;
      let byRole = false;
      try {
        // The rule is the workers' own, read as the decision arrives: a request's input is written by
        // whoever starts the workflow. Histories from before replay without it (the marker tells).
        const rule = patched('issue30-worker-rule')
          ? ((await recording.approvalPolicy()) ?? requestRule)
          : requestRule;
        // Who decides is who the page or the Slack app signed for, when the workers hold the key:
        // a client with raw access to Temporal cannot sign, so cannot decide.
        if (patched('issue30-decision-proof')) {
          verified = await signedBy(d);
          if (verified && proofsSeen.has(d.proof!))
            throw ApplicationFailure.nonRetryable(
              `this signed ${d.decision} by ${d.by} was sent before: a signature counts once; decide again on the page, in Slack or with the CLI`,
              DECISION_FAILURE.notAnApprover,
            );
          if (verified) proofsSeen.add(d.proof!);
          if (rule.requireProof && !verified)
            throw ApplicationFailure.nonRetryable(
              `a ${d.decision} in the name of ${d.by} carries no valid signature of the page or the Slack app: decide on the page (signed in), in Slack or with the CLI signed in (npx tidemark login)`,
              DECISION_FAILURE.notAnApprover,
            );
          byRole = verified && hasRole(d.actor!.roles, 'approver');
        }
        refuseUnder(rule, d, byRole, verified);
        // Histories from before the proof existed replay without the check (the marker tells them apart).
        if (needsGroup(d, rule, byRole) && patched('issue8-group-proof') && !(await vouchedFor(d)))
          throw ApplicationFailure.nonRetryable(
            `${d.by} may not decide reruns${whoMay(rule)}: membership of ${d.viaGroup} was not vouched for by the Slack app`,
            DECISION_FAILURE.notAnApprover,
          );
        // An approval approves the change it was shown: computed again now, it must be the same
        // (the data may have moved since). If not, the new preview is shown and nothing applies.
        if (d.decision === 'approve' && preview && patched('issue12-preview-recheck')) {
          const seen =
            d.previewDigest ??
            (d.source === 'slack' ? (shownTo.get(d.by) ?? inMessage ?? preview.digest) : preview.digest);
          const fresh = await previewing(request!.policy.startToCloseTimeoutMs)
            .previewWindow({
              job: input.job,
              windowStart: input.windowStart,
              generation: request!.window.generation,
            })
            .catch((err: unknown) => {
              throw ApplicationFailure.nonRetryable(
                `the preview could not be checked again (${causeOf(err)}); nothing was decided: try again`,
                DECISION_FAILURE.previewNotChecked,
              );
            });
          preview = fresh;
          if (fresh.digest !== seen) {
            const which = d.previewDigest || shownTo.has(d.by) ? 'you approved' : 'shown with the request';
            // The refusal shows its decider the new preview: theirs to approve from Slack now.
            shownTo.set(d.by, fresh.digest);
            throw ApplicationFailure.nonRetryable(
              `the data changed since the preview ${which}; nothing was decided. Now: ${previewLines(fresh, { rows: 5 }).join(' / ')}. Look, then approve again (if every preview differs, a column of a declared table takes a new value at every run: declare it in the job's writes[].volatile)`,
              DECISION_FAILURE.previewChanged,
            );
          }
          // The run commits only this change (the data may move again before it runs).
          approvedChange = fresh.outcome === 'ok' ? fresh.digest : undefined;
        }
        // Audit first: a decision that cannot be recorded is not applied, and the caller is told
        // it was refused (truthfully); one that is recorded applies.
        await recording
          .auditDecision({
            request: workflowId,
            actor: d.by,
            decision: d.decision,
            accepted: true,
            reason: d.note ?? null,
            source: d.source,
            ...(verified && d.actor
              ? {
                  subject: d.actor.subject,
                  displayName: d.actor.displayName,
                  credential: d.actor.credential,
                }
              : {}),
          })
          .catch((err: unknown) => {
            throw ApplicationFailure.nonRetryable(
              `the decision could not be recorded (${causeOf(err)}); nothing was decided: try again`,
              DECISION_FAILURE.decisionNotRecorded,
            );
          });
      } finally {
        deciding = undefined;
      }
      decision = d;
      return { accepted: true, decision: d.decision };
    },
    {
      validator: (d) => {
        if (decision)
          throw new Error(
            `already ${decision.decision === 'approve' ? 'approved' : 'rejected'} by ${decision.by}`,
          );
        // One decision is checked at a time (it may yet be refused): the next waits for its outcome.
        if (deciding) throw new Error(`a decision by ${deciding.by} is being checked: try again in a moment`);
        // Until the request is recorded (its generation reserved) it may yet be refused: a decision
        // now could be audited as accepted on a request that never was.
        if (!request && status === 'pending' && !closed)
          throw new Error(
            'the request is not recorded yet (its generation is being reserved): try again in a moment',
          );
        if (previewingNow && d.decision === 'approve')
          throw new Error(
            'the preview of what the rerun would change is being computed: try again in a moment',
          );
        if (closed || status !== 'pending')
          throw new Error(
            `the request ${closed || status === 'timed-out' ? 'timed out' : `is ${status}`}: it takes no decision now (ask again with npx tidemark rerun)`,
          );
        if (d.decision !== 'approve' && d.decision !== 'reject')
          throw new Error(`decision must be approve or reject, not "${String(d.decision)}"`);
        // Who may decide is checked in the handler, under the workers' own rule (an activity reads
        // it; a validator cannot). The requester may withdraw (reject) their own request.
      },
    },
  );

  request = await bookkeeping.requestRerun({
    job: input.job,
    windowStart: input.windowStart,
    reason: input.reason,
    requestedBy: input.requestedBy,
    workflowId,
    // The run recording it and the timeout the request was signed with; histories from before
    // replay with the arguments they recorded (the marker tells them apart).
    ...(patched('issue30-request-run')
      ? {
          run: workflowInfo().runId,
          ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
        }
      : {}),
    ...(input.requester && input.requestProof
      ? { requester: input.requester, requestProof: input.requestProof }
      : {}),
  });
  const generation = request.window.generation;
  let previewed = false;
  if (patched('issue12-preview')) {
    previewingNow = true;
    try {
      preview = await previewing(request.policy.startToCloseTimeoutMs).previewWindow({
        job: input.job,
        windowStart: input.windowStart,
        generation,
      });
    } catch (err) {
      // The request stands without it: the approver is told there is none.
      previewNote = causeOf(err);
    } finally {
      previewingNow = false;
    }
    previewed = true;
    inMessage = (preview as RerunPreview | null)?.digest;
  }
  // The request in words, with the preview as it stands (an approval that found the data moved shows the new one).
  const what = () =>
    `*Rerun requested* for \`${request.window.key}\` (window ${request.window.start} - ${request.window.end} of ${input.job}, generation ${generation})\n` +
    `asked by ${slackEscape(input.requestedBy)}: ${slackEscape(input.reason)}\nwill repeat: ${slackEscape(request.repeats.join(', ')) || 'no external effects'}${previewed ? `\n${slackPreview(preview, previewNote)}` : ''}`;
  const notice = async (event: 'requested' | 'decided' | 'finished', text: string) =>
    deliver(await bookkeeping.noticeRerun({ request: workflowId, event, text }));
  await notice('requested', what());
  if (!(await condition(() => decision !== undefined, input.timeoutMs ?? DAY_MS))) {
    // Refuse new decisions at once; one already being recorded still settles the request.
    closed = true;
    await condition(() => deciding === undefined);
  }
  if (decision === undefined) {
    status = 'timed-out';
    await bookkeeping.settleRerun({ request: workflowId, status });
    await notice('finished', `${what()}\n*Timed out*: nobody decided.`);
    return { outcome: 'timed-out', generation, decidedBy: null, window: null };
  }
  const d = decision!;
  if (d.decision === 'reject') {
    status = 'rejected';
    await bookkeeping.settleRerun({ request: workflowId, status, decidedBy: d.by, note: d.note ?? null });
    await notice(
      'finished',
      `${what()}\n*Rejected* by ${slackEscape(d.by)}${d.note ? `: ${slackEscape(d.note)}` : ''}.`,
    );
    return { outcome: 'rejected', generation, decidedBy: d.by, window: null };
  }
  status = 'approved';
  await bookkeeping.settleRerun({ request: workflowId, status, decidedBy: d.by, note: d.note ?? null });
  await notice(
    'decided',
    `${what()}\n*Approved* by ${slackEscape(d.by)}: running generation ${generation} ...`,
  );
  try {
    const result = (await executeChild(window, {
      workflowId: request.window.key,
      args: [
        {
          ...request.window,
          trigger: 'rerun',
          policy: request.policy,
          revision: WINDOW_REVISION,
          ...(approvedChange ? { approved: approvedChange } : {}),
        },
      ],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: searchAttributes('rerun', input.job, {
        start: request.window.start,
        generation,
      }),
      staticSummary: `${input.job}: rerun of window ${request.window.start} as generation ${generation}, approved by ${d.by}`,
    })) as WindowRunResult;
    status = 'done';
    await bookkeeping.settleRerun({ request: workflowId, status });
    await notice(
      'finished',
      `${what()}\n*Approved* by ${slackEscape(d.by)}: generation ${generation} ${result.outcome}${result.counts ? ` (${result.counts.input} records, ${result.counts.applied} applied)` : ''}.`,
    );
    return { outcome: 'done', generation, decidedBy: d.by, window: result };
  } catch (err) {
    status = 'failed';
    await bookkeeping.settleRerun({ request: workflowId, status, note: (err as Error).message });
    await notice(
      'finished',
      `${what()}\n*Approved* by ${slackEscape(d.by)}, but generation ${generation} failed: ${slackEscape((err as Error).message)}`,
    );
    throw err;
  }
}
