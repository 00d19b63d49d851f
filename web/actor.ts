// Who a request acts as. Signed in through the identity provider (or with a personal token), the
// person is the session's: a name in the request's body is never believed, and one that names
// someone else is refused. In single-user mode the page knows nobody, so the body's `by` names the
// person as the CLI's --by does (the page says it is not verified).
import type { FastifyRequest } from 'fastify';
import { requesterProblem, type Directory } from '../config/people.js';
import { HttpError } from './errors.js';
import type { Actor } from './sessions.js';

/** The request's actor: its session's (every /api request has one; a route run alone has none). */
/** The one person of single-user mode: anyone with the shared token, unverified (every role, given by the page). */
export const SINGLE_USER: Omit<Actor, 'credential' | 'roles'> = {
  subject: 'single-user',
  name: '',
  displayName: 'single-user mode (shared token)',
  verified: false,
};

/** The request's actor: its session's (every /api request has one; a route run alone has none, and no role). */
export const actorOf = (req: FastifyRequest): Actor =>
  req.session?.actor ?? { ...SINGLE_USER, roles: [], credential: 'none' };

export function actingAs(
  req: FastifyRequest,
  by: unknown,
  directory: Directory,
): { name: string; actor: Actor } {
  const actor = actorOf(req);
  const given = typeof by === 'string' ? by.trim() : '';
  if (actor.verified) {
    if (given && given !== actor.name)
      throw new HttpError(
        400,
        `by: you are signed in as ${actor.name} and act as yourself; leave "by" out (it was ${JSON.stringify(given.slice(0, 100))})`,
      );
    return { name: actor.name, actor };
  }
  const problem = requesterProblem(directory, given);
  if (problem) throw new HttpError(400, `by: ${problem}`);
  return { name: given, actor };
}
