// The page's sessions, kept in PostgreSQL (web_sessions): any replica of the page answers, a restart
// logs nobody out, and logging out ends the session everywhere. The cookie carries a random id; the
// table keeps only its SHA-256, so a copy of the table opens nothing. A session expires
// (TIDEMARK_WEB_SESSION_TTL) by the page's clock and is removed when next seen or swept at a login.
import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Role } from '../contract/roles.js';
import type { Database } from '../db/schema.js';

/** Who a request acts as: the person of a session or a personal token, or the single user. */
export interface Actor {
  /** The identity provider's subject; "single-user" in single-user mode. */
  readonly subject: string;
  /** Their tidemark name (TIDEMARK_OIDC_NAME_CLAIM), as in TIDEMARK_APPROVERS and TIDEMARK_PEOPLE. */
  readonly name: string;
  readonly displayName: string;
  readonly roles: readonly Role[];
  /** Signed in through the identity provider (or a personal token of such a person). */
  readonly verified: boolean;
  /** The session or token it came through: an id, never a secret. */
  readonly credential: string;
}

export interface Session {
  /** Empty for a bearer-token client (no cookie, so no cross-site request to guard against). */
  readonly csrf: string;
  readonly expires: number;
  readonly actor: Actor;
  /** The row's id (the cookie's hash), for a stream to check the session is still live. */
  readonly id?: string;
  /** A personal token's: whether it still acts (revoked or expired mid-stream: no more). */
  readonly live?: () => Promise<boolean>;
}

const COOKIE = /(?:^|;\s*)tidemark_session=([a-f0-9]{64})/;
export const sha256Hex = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** The credential id of a session: a prefix of its row's id (itself a hash of the cookie). */
const credentialOf = (rowId: string) => `session:${rowId.slice(0, 16)}`;

/**
 * `verified`: the sessions this page takes, signed in through the identity provider (true) or with
 * the shared token (false): a session of the other mode, opened before the page changed mode, is none.
 */
export function sessionStore(db: Kysely<Database>, now: () => Date, ttlMs: number, verified: boolean) {
  return {
    cookieOf: (cookieHeader: string | undefined) => COOKIE.exec(cookieHeader ?? '')?.[1],

    /** A new session for `who`; returns the cookie's value (shown once, to the browser). */
    async open(who: Omit<Actor, 'credential'>): Promise<{ cookie: string; session: Session }> {
      const t = now();
      await db.deleteFrom('web_sessions').where('expires_at', '<=', t).execute();
      const cookie = randomBytes(32).toString('hex');
      const id = sha256Hex(cookie);
      const csrf = randomBytes(32).toString('hex');
      const expires = t.getTime() + ttlMs;
      await db
        .insertInto('web_sessions')
        .values({
          id,
          csrf,
          subject: who.subject,
          name: who.name,
          display_name: who.displayName,
          roles: [...who.roles],
          verified: who.verified,
          expires_at: new Date(expires),
        })
        .execute();
      return { cookie, session: { id, csrf, expires, actor: { ...who, credential: credentialOf(id) } } };
    },

    /** The session of a cookie's value; null when there is none or it has expired (then removed). */
    async get(cookie: string | undefined): Promise<Session | null> {
      if (!cookie) return null;
      const id = sha256Hex(cookie);
      const row = await db.selectFrom('web_sessions').selectAll().where('id', '=', id).executeTakeFirst();
      if (!row || row.verified !== verified) return null;
      if (now().getTime() >= row.expires_at.getTime()) {
        await db.deleteFrom('web_sessions').where('id', '=', id).execute();
        return null;
      }
      return {
        id,
        csrf: row.csrf,
        expires: row.expires_at.getTime(),
        actor: {
          subject: row.subject,
          name: row.name,
          displayName: row.display_name,
          roles: row.roles as Role[],
          verified: row.verified,
          credential: credentialOf(id),
        },
      };
    },

    /** Is the session of this row id still there and unexpired? */
    async live(id: string): Promise<boolean> {
      const row = await db
        .selectFrom('web_sessions')
        .select('expires_at')
        .where('id', '=', id)
        .executeTakeFirst();
      return !!row && now().getTime() < row.expires_at.getTime();
    },

    async end(cookie: string): Promise<void> {
      await db.deleteFrom('web_sessions').where('id', '=', sha256Hex(cookie)).execute();
    },
  };
}

export type SessionStore = ReturnType<typeof sessionStore>;
