// The management web server on a test file's stack, and logging in to it over real HTTP.
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import type { Kysely } from 'kysely';
import type { Logger } from '../../activities/logger.js';
import type { Database } from '../../db/schema.js';
import { loadConfig } from '../../config/env.js';
import { startWebServer } from '../../web/server.js';
import type { TestDb } from './db.js';

type Stack = { readonly env: TestWorkflowEnvironment; readonly t: TestDb };

/**
 * Starts the web server for `catalog` with bearer `token`, its config read from the environment
 * plus the stack's database and Temporal and `env`; `now` is its clock (the wall clock unless given).
 */
export function startWeb(
  stack: Stack,
  opts: {
    /** The shared token (single-user mode); unused when the env configures an identity provider. */
    token?: string;
    /** Where to listen; default any free port. */
    port?: number;
    catalog: Parameters<typeof startWebServer>[0]['catalog'];
    env: Record<string, string>;
    now?: () => Date;
    /** Where the server logs (its 500s' causes); default the console. */
    logger?: Logger;
    /** Another database handle than the stack's (one that fails, for instance). */
    db?: Kysely<Database>;
  },
) {
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    ...opts.env,
  });
  return startWebServer({
    port: opts.port ?? 0,
    ...(opts.token ? { token: opts.token } : {}),
    db: opts.db ?? stack.t.db,
    client: stack.env.client,
    catalog: opts.catalog,
    config,
    ...(opts.now ? { now: opts.now } : {}),
    ...(opts.logger ? { logger: opts.logger } : {}),
  });
}

/** Posts the login form with `token`, not following the redirect. */
export const postLogin = (url: string, token: string) =>
  fetch(`${url}/login`, {
    method: 'POST',
    body: new URLSearchParams({ token }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    redirect: 'manual',
  });

/** The session cookie (name=value) a login response set. */
export const sessionCookie = (login: Response): string => login.headers.get('set-cookie')!.split(';')[0]!;
