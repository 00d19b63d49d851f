// One route module alone on a fastify instance, answering errors as web/server.ts does (an
// HttpError with its status, an unknown job 404, both as { error }), for app.inject tests.
import Fastify, { type FastifyInstance } from 'fastify';
import type { WebDeps } from '../../web/deps.js';
import { HttpError } from '../../web/errors.js';

export async function routeApp(
  routes: (app: FastifyInstance, deps: WebDeps) => Promise<void>,
  deps: WebDeps,
): Promise<FastifyInstance> {
  const app = Fastify();
  app.setErrorHandler((err: Error & { code?: string }, _req, reply) =>
    reply
      .code(err instanceof HttpError ? err.status : err.code === 'UNKNOWN_JOB' ? 404 : 500)
      .send({ error: err.message }),
  );
  await app.register((a) => routes(a, deps));
  return app;
}
