// Pending rerun approvals for the page: each request with the preview of what approving it would
// change, and Approve / Reject through the same decide() as the CLI and Slack (the workflow's
// validator: approvers only, never the requester; refusals audited). The decider is the signed-in
// person (web/actor.ts); in single-user mode, the name they give, as in the CLI (--by).
import type { FastifyInstance } from 'fastify';
import type { RerunState } from '../../contract/workflows.js';
import { directoryOf } from '../../config/people.js';
import { signed } from '../../activities/decision-proof.js';
import { actingAs, actorOf } from '../actor.js';
import { decide, DecisionRefused, openRun, pendingApprovals } from '../../operator/reruns.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';
import { stringFields } from './jobs.js';

type Decision = { Params: { decision: string } };

export async function approvalsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  const { client, config, db } = deps;

  app.get('/api/approvals', async () => ({ approvals: await pendingApprovals(client, db) }));

  app.post<Decision>('/api/approvals/:decision', async (req) => {
    const decision = req.params.decision;
    if (decision !== 'approve' && decision !== 'reject')
      throw new HttpError(404, `no such decision "${decision}": POST /api/approvals/approve or /reject`);
    const body = stringFields(req.body);
    const request = (body.request ?? '').trim();
    if (!request)
      throw new HttpError(400, 'request: name the rerun request (its id, from GET /api/approvals)');
    if (!actorOf(req).verified && !(body.by ?? '').trim())
      throw new HttpError(400, 'by: your name is required (the name tidemark knows you by, as in the CLI)');
    const { name: by, actor } = actingAs(req, body.by, directoryOf(config));
    req.auditTarget = request;
    let d: {
      decision: 'approve' | 'reject';
      by: string;
      source: string;
      note?: string;
      previewDigest?: string;
    } = {
      decision,
      by,
      source: 'web',
      ...(body.note?.trim() ? { note: body.note.trim() } : {}),
      // The preview the person saw: approving applies only that change (the workflow checks it again).
      ...(body.previewDigest ? { previewDigest: body.previewDigest } : {}),
    };
    try {
      // A signed-in person's decision carries the page's signature over who they are and what they
      // decided, for this very run of the request (activities/decision-proof.ts), which the workers
      // check; single-user mode's names are not signed.
      const run = actor.verified ? await openRun(client, request) : undefined;
      // What is approved is a change seen: the preview the person saw, or (the CLI shows none) the
      // one the request shows now; signed, so the signature approves that change alone.
      if (run && decision === 'approve' && !d.previewDigest) {
        const shown = await client.workflow
          .getHandle(request, run)
          .query<RerunState>('state')
          .catch(() => null);
        if (shown?.preview?.digest) d = { ...d, previewDigest: shown.preview.digest };
      }
      await decide(
        client,
        db,
        request,
        actor.verified
          ? signed(config.TIDEMARK_DECISION_KEY, {
              ...d,
              request,
              run: run ?? '',
              actor: {
                subject: actor.subject,
                displayName: actor.displayName,
                roles: actor.roles,
                credential: actor.credential,
              },
            })
          : d,
        run,
      );
    } catch (err) {
      if (err instanceof DecisionRefused) throw new HttpError(409, err.message);
      throw err;
    }
    return { ok: true, request, decision, by };
  });
}
