// Which role each API route needs (contract/roles.ts), in one table: reading needs viewer; a route
// that changes something names its role here, and one this table does not name needs admin, so a
// new route is closed until someone decides who may use it.
import type { Role } from '../contract/roles.js';

const NEEDS: Readonly<Record<string, Role>> = {
  'POST /api/jobs/:job/trigger': 'operator',
  'POST /api/jobs/:job/pause': 'operator',
  'POST /api/jobs/:job/resume': 'operator',
  'POST /api/jobs/:job/backfill': 'operator',
  'POST /api/jobs/:job/backfill/preview': 'operator',
  'POST /api/jobs/:job/rerun': 'operator',
  'POST /api/jobs/:job/backups/:windowKey/verify': 'operator',
  'POST /api/approvals/:decision': 'approver',
  'POST /api/effects/:key/:decision': 'approver',
  // Personal tokens: each person's own (the route keeps a token within its maker's roles).
  'POST /api/tokens': 'viewer',
  'POST /api/tokens/:id/revoke': 'viewer',
};

// Outside /api, and so outside this table: GET /runbook and /runbook.md (web/routes/runbook.ts) need
// no sign-in, since the runbook holds no job data.

/** The role a request to route `url` (its pattern, e.g. /api/jobs/:job/trigger) needs. */
export function roleFor(method: string, url: string | undefined): Role {
  if (method === 'GET' || method === 'HEAD') return 'viewer';
  return NEEDS[`${method} ${url ?? ''}`] ?? 'admin';
}

/** What each role may do, as the page shows it (to hide what one cannot do). */
export const ROLE_DOES: Readonly<Record<Role, string>> = {
  viewer: 'read everything',
  operator: 'trigger, pause, resume, backfill, ask for reruns, verify backups',
  approver: 'decide reruns and effects in doubt',
  admin: "everything, and the codec server's encode and large backfills",
};
