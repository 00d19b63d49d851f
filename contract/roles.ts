// Roles on the page and the API, from the identity provider's groups: viewer reads everything;
// operator triggers, pauses, resumes, backfills, asks for reruns and verifies backups; approver
// decides reruns and effects in doubt; admin may do everything (the codec's encode and large
// backfills are its alone). Roles are a set, not a ladder: an approver who is not an operator
// decides but does not ask, which keeps asking and deciding apart.

export const ROLES = ['viewer', 'operator', 'approver', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (x: string): x is Role => (ROLES as readonly string[]).includes(x);

/** A group (as the identity provider names it in the roles claim) and the role it gives. */
export interface RoleGrant {
  readonly group: string;
  readonly role: Role;
}

/**
 * Parses "group=role,group=role" (a group may give several roles, one entry each). Returns the
 * grants, or the first problem naming the entry and the fix.
 */
export function parseRoleMap(text: string | undefined): RoleGrant[] | string {
  const grants: RoleGrant[] = [];
  for (const entry of (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const at = entry.lastIndexOf('=');
    const group = entry.slice(0, at).trim();
    const role = entry.slice(at + 1).trim();
    if (at <= 0 || !group)
      return `"${entry}" must be group=role, e.g. tidemark-ops=operator (roles: ${ROLES.join(', ')})`;
    if (!isRole(role)) return `"${entry}": "${role}" is not a role; use one of ${ROLES.join(', ')}`;
    grants.push({ group, role });
  }
  return grants;
}

/**
 * The roles a person's claim gives: each group the map names, and viewer with any of them (one who
 * may act may see). A claim of one string counts as a list of one; anything else gives nothing.
 */
export function rolesOf(claim: unknown, grants: readonly RoleGrant[]): Role[] {
  const groups = typeof claim === 'string' ? [claim] : Array.isArray(claim) ? claim : [];
  const roles = new Set<Role>();
  for (const g of grants) if (groups.includes(g.group)) roles.add(g.role);
  if (roles.size > 0) roles.add('viewer');
  if (roles.has('admin')) for (const r of ROLES) roles.add(r);
  return ROLES.filter((r) => roles.has(r));
}

/** Does a person with `roles` have `role`? Admin has every role. */
export const hasRole = (roles: readonly string[], role: Role): boolean =>
  roles.includes(role) || roles.includes('admin');
