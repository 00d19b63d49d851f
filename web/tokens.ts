// Personal API tokens, for automation in place of one shared bearer token: each made by a signed-in
// person, for one of their roles, with a label and an expiry, listed on the page and revocable; and
// the CLI's, made by `tidemark login` with its maker's roles. A token is "tmk_<id>_<secret>": the
// table keeps the id and the secret's SHA-256 only, so the secret is shown once, when made. A token
// acts as its maker (their subject and name), with its roles.
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { hasRole, isRole, ROLES, type Role } from '../contract/roles.js';
import type { Database } from '../db/schema.js';
import { parseDuration } from '../schedules/duration.js';
import { HttpError } from './errors.js';
import { sha256Hex, type Actor } from './sessions.js';

const TOKEN = /^tmk_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$/;
/** How long a token lasts unless told, and at most. */
const DEFAULT_TTL = '30d';
const MAX_TTL_MS = 366 * 86_400_000;

export interface TokenRow {
  readonly id: string;
  readonly label: string;
  readonly roles: readonly string[];
  readonly name: string;
  readonly createdAt: string;
  readonly expiresAt: string;
  readonly revokedAt: string | null;
  readonly lastUsedAt: string | null;
}

/** The roles a token made for `role` acts with: it, and viewer (one who may act may see). */
const rolesOfToken = (role: Role): Role[] =>
  ROLES.filter((r) => r === role || r === 'viewer' || role === 'admin');

/** The fields of a request to make a token, each named when wrong. */
function checked(by: Actor, body: Record<string, unknown>): { label: string; roles: Role[]; ttl: number } {
  if (!by.verified)
    throw new HttpError(
      400,
      'personal tokens are made by a person signed in through the identity provider; single-user mode has the shared token',
    );
  const label = typeof body.label === 'string' ? body.label.trim() : '';
  if (/\p{C}/u.test(label))
    throw new HttpError(400, 'label: control or invisible characters are not allowed; write plain text');
  if (!label || label.length > 100)
    throw new HttpError(
      400,
      'label: say what the token is for, in at most 100 characters, e.g. "nightly export"',
    );
  const role = typeof body.role === 'string' ? body.role : '';
  if (!isRole(role)) throw new HttpError(400, `role: one of ${ROLES.join(', ')}`);
  if (!hasRole(by.roles, role))
    throw new HttpError(
      403,
      `role: you have ${by.roles.join(', ')}; a token cannot have ${role}, a role you do not have`,
    );
  const ttlText = body.expiresIn === undefined ? DEFAULT_TTL : String(body.expiresIn);
  const ttl = /^[1-9]\d*(m|h|d)$/.test(ttlText) ? parseDuration(ttlText) : undefined;
  if (!ttl || ttl > MAX_TTL_MS)
    throw new HttpError(
      400,
      `expiresIn: a duration up to 366d, e.g. "30d" or "12h" (not ${JSON.stringify(ttlText.slice(0, 20))})`,
    );
  return { label, roles: rolesOfToken(role), ttl };
}

const rowOf = (r: {
  id: string;
  label: string;
  roles: string[];
  name: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}): TokenRow => ({
  id: r.id,
  label: r.label,
  roles: r.roles,
  name: r.name,
  createdAt: r.created_at.toISOString(),
  expiresAt: r.expires_at.toISOString(),
  revokedAt: r.revoked_at?.toISOString() ?? null,
  lastUsedAt: r.last_used_at?.toISOString() ?? null,
});

export function tokenStore(db: Kysely<Database>, now: () => Date) {
  async function issue(
    by: Omit<Actor, 'credential'>,
    label: string,
    roles: readonly Role[],
    ttlMs: number,
  ): Promise<{ token: string; row: TokenRow }> {
    const id = randomBytes(9)
      .toString('base64url')
      .toLowerCase()
      .replace(/[^a-z0-9]/g, '0')
      .slice(0, 12);
    const secret = randomBytes(32).toString('base64url');
    const t = now();
    const row = await db
      .insertInto('api_tokens')
      .values({
        id,
        hash: sha256Hex(secret),
        label,
        subject: by.subject,
        name: by.name,
        display_name: by.displayName,
        roles: [...roles],
        created_at: t,
        expires_at: new Date(t.getTime() + ttlMs),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { token: `tmk_${id}_${secret}`, row: rowOf(row) };
  }

  return {
    /** Makes a token for `by` from a request's fields (label, role, expiresIn). */
    async make(by: Actor, body: Record<string, unknown>): Promise<{ token: string; row: TokenRow }> {
      const { label, roles, ttl } = checked(by, body);
      return issue(by, label, roles, ttl);
    },

    /** A token with all of `by`'s roles, for `tidemark login` (the CLI): as long as a page session, at most 366 days. */
    forCli: (by: Omit<Actor, 'credential'>, label: string, ttlMs: number) =>
      issue(
        by,
        label
          .replace(/[\p{C}\s]+/gu, ' ')
          .trim()
          .slice(0, 100) || 'tidemark login',
        by.roles,
        Math.min(ttlMs, MAX_TTL_MS),
      ),

    /** The person a bearer token acts as, or null: not a token, unknown, wrong secret, revoked or expired. */
    async actorOf(bearer: string): Promise<Actor | null> {
      const m = TOKEN.exec(bearer);
      if (!m) return null;
      const row = await db.selectFrom('api_tokens').selectAll().where('id', '=', m[1]!).executeTakeFirst();
      const t = now();
      if (!row || row.hash !== sha256Hex(m[2]!) || row.revoked_at || t >= row.expires_at) return null;
      // Last use to the minute: a write per request would cost each API call an UPDATE.
      if (!row.last_used_at || t.getTime() - row.last_used_at.getTime() >= 60_000)
        await db.updateTable('api_tokens').set({ last_used_at: t }).where('id', '=', row.id).execute();
      return {
        subject: row.subject,
        name: row.name,
        displayName: row.display_name,
        roles: row.roles.filter(isRole),
        verified: true,
        credential: `token:${row.id}`,
      };
    },

    /** Whether a bearer token still acts (neither revoked nor expired): a stream checks it as it goes. */
    async live(bearer: string): Promise<boolean> {
      const m = TOKEN.exec(bearer);
      if (!m) return false;
      const row = await db
        .selectFrom('api_tokens')
        .select(['hash', 'revoked_at', 'expires_at'])
        .where('id', '=', m[1]!)
        .executeTakeFirst();
      return !!row && row.hash === sha256Hex(m[2]!) && !row.revoked_at && now() < row.expires_at;
    },

    /** A person's tokens (an admin's list: everyone's), newest first. */
    async list(by: Actor): Promise<TokenRow[]> {
      let q = db.selectFrom('api_tokens').selectAll().orderBy('created_at', 'desc').limit(500);
      if (!hasRole(by.roles, 'admin')) q = q.where('subject', '=', by.subject);
      return (await q.execute()).map(rowOf);
    },

    /** Revokes a token of `by`'s (an admin: anyone's); at once, for every request after. */
    async revoke(by: Actor, id: string): Promise<TokenRow> {
      let q = db
        .updateTable('api_tokens')
        .set({ revoked_at: now() })
        .where('id', '=', id)
        .where('revoked_at', 'is', null);
      if (!hasRole(by.roles, 'admin')) q = q.where('subject', '=', by.subject);
      const row = await q.returningAll().executeTakeFirst();
      if (!row)
        throw new HttpError(
          404,
          `token: you have no unrevoked token "${id.slice(0, 40)}" (see GET /api/tokens)`,
        );
      return rowOf(row);
    },
  };
}

export type TokenStore = ReturnType<typeof tokenStore>;
