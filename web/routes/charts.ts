// The page's charts, drawn on the server by the library the e-mails use and served as SVG for an
// <img> (no script, so the page's CSP holds). Never cached: a chart is a view of the ledger now.
import type { FastifyInstance } from 'fastify';
import { durationsSparklineSvg } from '../../charts/sparkline.js';
import { recentDurations } from '../../operator/durations.js';
import type { WebDeps } from '../deps.js';

/** How many of a job's recent window runs its sparkline shows. */
export const SPARKLINE_RUNS = 48;

export async function chartsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  app.get<{ Params: { job: string } }>('/api/jobs/:job/durations.svg', async (req, reply) => {
    // An unknown job throws UNKNOWN_JOB, which the server answers with 404 and its message.
    const job = deps.catalog.get(req.params.job);
    const runs = await recentDurations(deps.db, job.name, SPARKLINE_RUNS);
    return reply
      .type('image/svg+xml; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(durationsSparklineSvg(job.name, runs));
  });
}
