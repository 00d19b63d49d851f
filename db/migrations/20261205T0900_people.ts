// Who acts (issue 30): the page's sessions and the logins under way kept in the database (any
// replica of the page answers, a restart logs nobody out), personal API tokens, and the audit of
// each decision with the person's verified identity: the identity provider's subject, the name
// shown, the session or token it came through. Additive: the previous release's writers leave the
// new audit columns null.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('web_sessions')
    // The SHA-256 of the cookie's value: a copy of the table opens no session.
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('csrf', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('display_name', 'text', (c) => c.notNull())
    .addColumn('roles', sql`text[]`, (c) => c.notNull())
    .addColumn('verified', 'boolean', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('web_sessions_expires_idx').on('web_sessions').column('expires_at').execute();
  await db.schema
    .createTable('web_logins')
    // The SHA-256 of the OAuth state; the PKCE verifier and nonce are never sent to the browser.
    .addColumn('state', 'text', (c) => c.primaryKey())
    .addColumn('verifier', 'text', (c) => c.notNull())
    .addColumn('nonce', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('api_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    // The SHA-256 of the token's secret part: shown once when made, never stored.
    .addColumn('hash', 'text', (c) => c.notNull())
    .addColumn('label', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('display_name', 'text', (c) => c.notNull())
    // What it may do: the role it was made for (and viewer), or, made by `tidemark login`, its
    // maker's roles at sign-in.
    .addColumn('roles', sql`text[]`, (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
    .addColumn('revoked_at', 'timestamptz')
    .addColumn('last_used_at', 'timestamptz')
    .execute();
  await db.schema.createIndex('api_tokens_subject_idx').on('api_tokens').column('subject').execute();
  // What each signed-in person (or token) changed through the page: the route, its job and
  // target (a rerun request's id, a window), and who, as the approval audit records decisions.
  await db.schema
    .createTable('web_actions')
    .addColumn('id', 'bigserial', (c) => c.primaryKey())
    .addColumn('at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('action', 'text', (c) => c.notNull())
    .addColumn('job', 'text')
    .addColumn('target', 'text')
    .addColumn('actor', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('display_name', 'text', (c) => c.notNull())
    .addColumn('credential', 'text', (c) => c.notNull())
    .addColumn('verified', 'boolean', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('web_actions_target_idx').on('web_actions').column('target').execute();
  // The run of the workflow that recorded a request: another run under the same id (a client
  // that terminated the request and started it again with input of its own) is refused.
  await db.schema.alterTable('rerun_requests').addColumn('run_id', 'text').execute();
  await db.schema
    .alterTable('approval_audit')
    .addColumn('subject', 'text')
    .addColumn('display_name', 'text')
    .addColumn('credential', 'text')
    .execute();
}
