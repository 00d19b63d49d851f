// Effects in doubt with Resend / Skip, and open incidents. A decision goes through
// operator/effects.ts to activities/decisions.ts, the code `tidemark effects decide|retry` and the
// Slack buttons run, with activity dependencies built from the configuration as the CLI builds them
// (so a resend goes out through the channels configured for this process).
import type { FastifyInstance } from 'fastify';
import { directoryOf } from '../../config/people.js';
import {
  decideEffectAs,
  effectsInDoubt,
  EffectDecisionRefused,
  PageCursorError,
} from '../../operator/effects.js';
import { page, pageAsk } from '../paging.js';
import { incidentsOpen } from '../../operator/incidents.js';
import { buildDeps } from '../../workers/deps.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';
import { actingAs, actorOf } from '../actor.js';
import { hasRole } from '../../contract/roles.js';

type Decide = { Params: { key: string; decision: string }; Body: unknown };

/** `?job=` when given: a job of the catalog (an unknown one is a 404 naming the known ones). */
const jobFilter = (deps: WebDeps, query: unknown): { job?: string } => {
  const job = (query as { job?: unknown } | undefined)?.job;
  if (job === undefined || job === '') return {};
  if (typeof job !== 'string') throw new HttpError(400, 'job: give one job name, e.g. ?job=sales-hourly');
  return { job: deps.catalog.get(job).name };
};

/** A page after an item that does not exist is a 400 naming `after`. */
async function cursorChecked<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (err) {
    if (err instanceof PageCursorError) throw new HttpError(400, err.message);
    throw err;
  }
}

export async function effectsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  const activityDeps = {
    ...buildDeps(deps.config, { db: deps.db, catalog: deps.catalog, client: deps.client }),
    now: deps.now,
  };
  const directory = directoryOf(deps.config);

  // In pages (web/paging.ts): 20,000 effects in doubt were one 18 MB answer.
  app.get('/api/effects', async (req, reply) => {
    const ask = pageAsk(req);
    const rows = await cursorChecked(() =>
      effectsInDoubt(deps.db, { ...jobFilter(deps, req.query), ...ask, limit: ask.limit + 1 }, deps.catalog),
    );
    return page(req, reply, ask, rows, (e) => e.key);
  });

  app.get('/api/incidents', async (req, reply) => {
    const ask = pageAsk(req);
    const rows = await cursorChecked(() =>
      incidentsOpen(deps.db, jobFilter(deps, req.query).job, { ...ask, limit: ask.limit + 1 }),
    );
    return page(req, reply, ask, rows, (i) => i.id);
  });

  app.post<Decide>('/api/effects/:key/:decision', async (req) => {
    const decision = req.params.decision;
    if (decision !== 'resend' && decision !== 'skip')
      throw new HttpError(404, `no action "${decision}" on an effect; use resend or skip`);
    const body = (req.body ?? {}) as Record<string, unknown>;
    const actor = actorOf(req);
    if (!actor.verified && (typeof body.by !== 'string' || !body.by.trim()))
      throw new HttpError(400, 'by: name who decides (your tidemark name), e.g. {"by": "alice"}');
    if (body.by !== undefined && typeof body.by !== 'string')
      throw new HttpError(400, 'by: a name, e.g. {"by": "alice"}');
    // Single-user mode's name is checked (and a refusal audited) by decideEffectAs, as the CLI's.
    const name = actor.verified ? actingAs(req, body.by, directory).name : (body.by as string).trim();
    try {
      const result = await decideEffectAs(activityDeps, directory, {
        key: req.params.key,
        decision,
        by: name,
        source: 'page',
        ...(actor.verified
          ? {
              actor: {
                subject: actor.subject,
                displayName: actor.displayName,
                credential: actor.credential,
                approver: hasRole(actor.roles, 'approver'),
              },
            }
          : {}),
      });
      return { ok: true, ...result };
    } catch (err) {
      if (err instanceof EffectDecisionRefused) throw new HttpError(err.status, err.message);
      throw err;
    }
  });
}
