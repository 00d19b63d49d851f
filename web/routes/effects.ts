// Effects in doubt with Resend / Skip, and open incidents. A decision goes through
// operator/effects.ts to activities/decisions.ts, the code `tidemark effects decide|retry` and the
// Slack buttons run, with activity dependencies built from the configuration as the CLI builds them
// (so a resend goes out through the channels configured for this process).
import type { FastifyInstance } from 'fastify';
import { directoryOf } from '../../config/people.js';
import { decideEffectAs, effectsInDoubt, EffectDecisionRefused } from '../../operator/effects.js';
import { incidentsOpen } from '../../operator/incidents.js';
import { buildDeps } from '../../workers/deps.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';

type Decide = { Params: { key: string; decision: string }; Body: unknown };

/** `?job=` when given: a job of the catalog (an unknown one is a 404 naming the known ones). */
const jobFilter = (deps: WebDeps, query: unknown): { job?: string } => {
  const job = (query as { job?: unknown } | undefined)?.job;
  if (job === undefined || job === '') return {};
  if (typeof job !== 'string') throw new HttpError(400, 'job: give one job name, e.g. ?job=sales-hourly');
  return { job: deps.catalog.get(job).name };
};

export async function effectsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  const activityDeps = {
    ...buildDeps(deps.config, { db: deps.db, catalog: deps.catalog, client: deps.client }),
    now: deps.now,
  };
  const directory = directoryOf(deps.config);

  app.get(
    '/api/effects',
    async (req) => await effectsInDoubt(deps.db, jobFilter(deps, req.query), deps.catalog),
  );

  app.get('/api/incidents', async (req) => await incidentsOpen(deps.db, jobFilter(deps, req.query).job));

  app.post<Decide>('/api/effects/:key/:decision', async (req) => {
    const decision = req.params.decision;
    if (decision !== 'resend' && decision !== 'skip')
      throw new HttpError(404, `no action "${decision}" on an effect; use resend or skip`);
    const body = (req.body ?? {}) as Record<string, unknown>;
    if (typeof body.by !== 'string' || !body.by.trim())
      throw new HttpError(400, 'by: name who decides (your tidemark name), e.g. {"by": "alice"}');
    try {
      const result = await decideEffectAs(activityDeps, directory, {
        key: req.params.key,
        decision,
        by: body.by.trim(),
        source: 'page',
      });
      return { ok: true, ...result };
    } catch (err) {
      if (err instanceof EffectDecisionRefused) throw new HttpError(err.status, err.message);
      throw err;
    }
  });
}
