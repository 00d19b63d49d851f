// Personal API tokens on the page (web/tokens.ts): one's own listed (an admin's: everyone's), made
// for one of one's roles (the secret shown once), revoked at once. Registered by web/server.ts.
import type { FastifyInstance } from 'fastify';
import { actorOf } from '../actor.js';
import { HttpError } from '../errors.js';
import type { TokenStore } from '../tokens.js';

export async function tokenRoutes(app: FastifyInstance, tokens: TokenStore): Promise<void> {
  app.get('/api/tokens', async (req) => ({ tokens: await tokens.list(actorOf(req)) }));

  app.post('/api/tokens', async (req, reply) => {
    // Made on the page, signed in: a token making another would outlive its own revocation.
    if (req.session && !req.session.csrf)
      throw new HttpError(
        403,
        'tokens are made on the page by a person signed in there, not with a token (a token that made another would live on after it is revoked)',
      );
    const made = await tokens.make(actorOf(req), (req.body ?? {}) as Record<string, unknown>);
    req.auditTarget = made.row.id;
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
