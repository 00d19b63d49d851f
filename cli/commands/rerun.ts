// rerun, approve, reject, reruns: run a completed window again, after an approval.
import { isoUtc } from '../../contract/window-key.js';
import {
  decide,
  notAWindowStart,
  previewRerun,
  requestRerun,
  requestState,
  rerunResult,
} from '../../operator/reruns.js';
import { previewLines } from '../../contract/preview-text.js';
import type { RerunState } from '../../contract/workflows.js';
import type { Command } from '../command.js';
import { asSignedIn, readLogin } from '../login.js';
import { table, UsageError, type CliContext } from '../context.js';
import { parseWhen } from '../../operator/dates.js';

const who = (by: unknown) => (typeof by === 'string' && by) || process.env.USER || 'cli';

export const rerunCommand: Command = {
  name: 'rerun',
  summary:
    'ask to run a completed window again (a new generation); approvers decide with approve/reject or in Slack',
  usage: [
    'rerun <job> --window DATE --reason TEXT [--by NAME] [--wait] [--json]',
    'rerun <job> --window DATE --preview [--json]   (what it would change; nothing is requested)',
  ],
  options: {
    window: { type: 'string' },
    reason: { type: 'string' },
    by: { type: 'string' },
    wait: { type: 'boolean' },
    preview: { type: 'boolean' },
  },
  async run(ctx, { positionals, values }) {
    const job = ctx.job(positionals[0], 'rerun');
    // The window may be named as the second word too: rerun <job> <window> --preview.
    const window = (values.window as string | undefined) ?? positionals[1];
    if (!window) throw new UsageError('rerun: --window is required (the start of the window)');
    if (!values.preview && !(values.reason as string | undefined)?.trim())
      throw new UsageError('rerun: --reason is required (approvers see it)');
    const start = parseWhen('--window', window, job.timezone);
    // Refused here, before any workflow starts: the window that contains the time is the likely intent.
    const misaligned = notAWindowStart(job, start);
    if (misaligned)
      throw new UsageError(
        `--window: ${misaligned.message}: use --window ${isoUtc(misaligned.window.start)}`,
      );
    // Signed in (npx tidemark login): asked through the page, as that person, signed for the workers.
    const login = values.preview ? null : await readLogin();
    if (login) {
      if (values.by && values.by !== login.name)
        throw new UsageError(`--by: you are signed in as ${login.name} and ask as yourself`);
      const asked = await asSignedIn<{ request: string; generation: number | null; note?: string }>(
        login,
        `/api/jobs/${encodeURIComponent(job.name)}/rerun`,
        { window: isoUtc(start), reason: values.reason as string },
      );
      if (values.wait) {
        const r = await rerunResult(await ctx.client(), asked.request);
        return {
          json: { id: asked.request, ...r },
          lines: [`${r.outcome}${r.decidedBy ? ` (decided by ${r.decidedBy})` : ''}`],
        };
      }
      return {
        json: { id: asked.request, generation: asked.generation },
        lines: [
          `rerun requested: ${asked.request} by ${login.name}${asked.note ? ` (${asked.note})` : ''}`,
          `approve with: npx tidemark approve ${asked.request}`,
        ],
      };
    }
    const client = await ctx.client();
    if (values.preview) {
      const preview = await previewRerun(client, ctx.config, { job, windowStart: start, now: new Date() });
      return { json: preview, lines: previewLines(preview) };
    }
    const handle = await requestRerun(client, ctx.config, {
      job,
      windowStart: start,
      reason: values.reason as string,
      requestedBy: who(values.by),
      now: new Date(),
    });
    const state = await requestState(client, handle.workflowId);
    const lines = [
      `rerun requested: ${handle.workflowId}`,
      `window ${state.request!.window.key} (generation ${state.request!.window.generation}); will repeat: ${state.request!.repeats.join(', ') || 'no external effects'}`,
      ...previewOf(state),
      `approve with: npx tidemark approve ${handle.workflowId}`,
    ];
    if (!values.wait) return { json: { id: handle.workflowId, ...state }, lines };
    (ctx.io.json ? ctx.io.err : ctx.io.out)(lines.join('\n'));
    const r = await rerunResult(client, handle.workflowId);
    return {
      json: { id: handle.workflowId, ...r },
      lines: [`${r.outcome}${r.decidedBy ? ` (decided by ${r.decidedBy})` : ''}`],
    };
  },
};

/** The request's preview as the approvers see it, or why there is none. */
function previewOf(state: RerunState): string[] {
  if (state.preview) return previewLines(state.preview);
  return state.previewNote ? [`preview: could not be computed: ${state.previewNote}`] : [];
}

function decision(kind: 'approve' | 'reject'): Command {
  return {
    name: kind,
    summary:
      kind === 'approve'
        ? 'approve a rerun request (approvers only; not your own)'
        : 'reject a rerun request (approvers, or its requester)',
    usage: [`${kind} <request id> [--by NAME] [--note TEXT] [--json]`],
    options: { by: { type: 'string' }, note: { type: 'string' } },
    async run(ctx: CliContext, { positionals, values }) {
      const id = positionals[0];
      if (!id) throw new UsageError(`${kind}: name the request (see: npx tidemark reruns)`);
      // Signed in (npx tidemark login): decided through the page, as that person, signed for the workers.
      const login = await readLogin();
      if (login) {
        if (values.by && values.by !== login.name)
          throw new UsageError(
            `--by: you are signed in as ${login.name} and decide as yourself (npx tidemark logout to decide by name, unverified)`,
          );
        await asSignedIn(login, `/api/approvals/${kind}`, {
          request: id,
          ...(values.note ? { note: values.note as string } : {}),
        });
        return {
          json: { request: id, decision: kind, by: login.name },
          lines: [`${id}: ${kind === 'approve' ? 'approved' : 'rejected'} by ${login.name}`],
        };
      }
      const by = who(values.by);
      await decide(await ctx.client(), await ctx.db(), id, {
        decision: kind,
        by,
        source: 'cli',
        ...(values.note ? { note: values.note as string } : {}),
      });
      return {
        json: { request: id, decision: kind, by },
        lines: [`${id}: ${kind === 'approve' ? 'approved' : 'rejected'} by ${by}`],
      };
    },
  };
}

export const approveCommand = decision('approve');
export const rejectCommand = decision('reject');

export const rerunsCommand: Command = {
  name: 'reruns',
  summary: 'rerun requests, newest first, with their state',
  usage: ['reruns [--job J] [--json]'],
  options: { job: { type: 'string' } },
  async run(ctx, { values }) {
    let q = (await ctx.db())
      .selectFrom('rerun_requests')
      .selectAll()
      .orderBy('requested_at', 'desc')
      .limit(50);
    if (values.job) q = q.where('job', '=', values.job as string);
    const rows = (await q.execute()).map((r) => ({
      request: r.workflow_id,
      job: r.job,
      window: isoUtc(r.window_start),
      generation: r.generation,
      status: r.status,
      requestedBy: r.requested_by,
      decidedBy: r.decided_by,
      reason: r.reason,
    }));
    return {
      json: rows,
      lines: rows.length
        ? table(
            ['REQUEST', 'STATUS', 'GEN', 'BY', 'DECIDED BY', 'REASON'],
            rows.map((r) => [r.request, r.status, r.generation, r.requestedBy, r.decidedBy, r.reason]),
          )
        : ['(no rerun requests)'],
    };
  },
};
