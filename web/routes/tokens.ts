// Personal API tokens on the page (web/tokens.ts): one's own listed (an admin's: everyone's), made
// for one of one's roles (the secret shown once), revoked at once. Registered by web/server.ts.
import type { FastifyInstance } from 'fastify';
import { actorOf } from '../actor.js';
import type { TokenStore } from '../tokens.js';

export async function tokenRoutes(app: FastifyInstance, tokens: TokenStore): Promise<void> {
  app.get('/api/tokens', async (req) => ({ tokens: await tokens.list(actorOf(req)) }));

  app.post('/api/tokens', async (req, reply) => {
    const made = await tokens.make(actorOf(req), (req.body ?? {}) as Record<string, unknown>);
    return reply.code(201).send({
      ...made.row,
      token: made.token,
      note: 'shown once: keep it in your secret store; send it as Authorization: Bearer <token>',
    });
  });

  app.post<{ Params: { id: string } }>('/api/tokens/:id/revoke', async (req) => ({
    ok: true,
    token: await tokens.revoke(actorOf(req), req.params.id),
  }));
}
