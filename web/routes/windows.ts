// A job's window grid and one window's detail, as JSON for the page (data in operator/).
import type { FastifyInstance } from 'fastify';
import { UnknownJobError } from '../../schedules/define.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';
import { UnknownWindowError, windowDetail } from '../../operator/window-detail.js';
import { GridRangeError, windowGrid } from '../../operator/window-grid.js';

function jobOf(deps: WebDeps, name: string) {
  try {
    return deps.catalog.get(name);
  } catch (err) {
    if (err instanceof UnknownJobError) throw new HttpError(404, `job: ${err.message}`);
    throw err;
  }
}

export async function windowsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  app.get<{ Params: { job: string }; Querystring: { from?: string; to?: string } }>(
    '/api/jobs/:job/grid',
    async (req) => {
      const job = jobOf(deps, req.params.job);
      try {
        return await windowGrid({
          db: deps.db,
          client: deps.client,
          job,
          now: deps.now(),
          from: req.query.from,
          to: req.query.to,
        });
      } catch (err) {
        if (err instanceof GridRangeError) throw new HttpError(400, err.message);
        throw err;
      }
    },
  );

  // The key is the window key `<job>/<start>` URL-encoded as one segment, or the start alone.
  app.get<{ Params: { job: string; key: string } }>('/api/jobs/:job/windows/:key', async (req) => {
    const job = jobOf(deps, req.params.job);
    try {
      return await windowDetail({
        db: deps.db,
        client: deps.client,
        config: deps.config,
        job,
        key: req.params.key,
        now: deps.now(),
      });
    } catch (err) {
      if (err instanceof UnknownWindowError) throw new HttpError(404, err.message);
      throw err;
    }
  });
}
