// Backfills: a dry-run preview of a range, and the progress of running and recent backfills.
// Starting one is POST /api/jobs/:job/backfill (web/routes/jobs.ts).
import type { FastifyInstance } from 'fastify';
import { BackfillInputError, listBackfills, previewBackfill } from '../../operator/backfills.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';
import { stringFields } from './jobs.js';

export async function backfillsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  app.post<{ Params: { job: string } }>('/api/jobs/:job/backfill/preview', async (req) => {
    const job = deps.catalog.get(req.params.job);
    const body = stringFields(req.body);
    return previewBackfill(deps.db, job, body, {
      now: deps.now(),
      limit: deps.config.TIDEMARK_WEB_MAX_BACKFILL_WINDOWS,
    }).catch((err: unknown) => {
      throw err instanceof BackfillInputError ? new HttpError(400, err.message) : err;
    });
  });

  app.get('/api/backfills', async () => ({
    backfills: await listBackfills(deps.client, deps.catalog, deps.now()),
  }));
}
