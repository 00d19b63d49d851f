// The management page's server (fastify): the static page (web/public), a sign-in, and the JSON API
// the page's views call. People sign in through the company's identity provider (web/oidc.ts;
// roles from its groups, web/access.ts), or, in single-user mode (no provider configured: trials,
// tidemark dev), with the shared token. A sign-in sets an HttpOnly, SameSite=Strict session cookie
// (sessions in PostgreSQL, web/sessions.ts); API clients may send `Authorization: Bearer`. Every
// state-changing request must carry the session's CSRF token and a same-origin Origin. Sessions
// expire (TIDEMARK_WEB_SESSION_TTL) and can log out. Updates arrive without a reload over server-sent
// events. Bad input is a 400 that names the field, never a 500. /metrics answers a logged-in
// person or the scrape token (TIDEMARK_METRICS_TOKEN): counts and job names only, never a secret.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import fastifyRateLimit from '@fastify/rate-limit';
import fastifyStatic from '@fastify/static';
import type { Client } from '@temporalio/client';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import { watchQueueOf, type Config } from '../config/env.js';
import type { Database } from '../db/schema.js';
import { overviewHub } from './overview-stream.js';
import type { Catalog } from '../schedules/job.js';
import { parseDuration } from '../schedules/duration.js';
import { createMetrics } from '../workers/metrics.js';
import { bearerIs, metricsText } from '../workers/probes.js';
import { webDeps } from './deps.js';
import { payloadCodecOf } from '../codec/index.js';
import { HttpError } from './errors.js';
import { trustProxyOf } from './guesses.js';
import { guessThrottle } from '../workers/guesses.js';
import { roleFor, ROLE_DOES } from './access.js';
import { oidcLogin } from './oidc.js';
import { SINGLE_USER as ONE_USER } from './actor.js';
import { sessionStore, type Actor, type Session } from './sessions.js';
import { tokenStore } from './tokens.js';
import { tokenRoutes } from './routes/tokens.js';
import { hasRole, ROLES } from '../contract/roles.js';
import { consoleLogger, type Logger } from '../activities/logger.js';
import { redactorFromConfig } from '../workers/channels.js';
import { codecRoutes } from './routes/codec.js';
import { routeModules } from './routes/index.js';
import { runbookRoutes } from './routes/runbook.js';

export interface WebOptions {
  port: number;
  /** Where to listen; default loopback. */
  host?: string;
  /** The shared token of single-user mode; unused when an identity provider is configured. */
  token?: string;
  db: Kysely<Database>;
  client: Client;
  catalog: Catalog;
  config: Config;
  /** The clock sessions expire by; default the system clock. */
  now?: () => Date;
  /** What /metrics serves; default the deployment's gauges and this process's own metrics. */
  metrics?: { registry: Registry; sdkMetricsUrl?: string };
  /** Where the causes of 500s go (under their reference); default the console. */
  logger?: Logger;
}

/** The page's files: next to this module both in the source (tsx) and in dist/ (the build copies them). */
export const PUBLIC_DIR = fileURLToPath(new URL('./public/', import.meta.url));

// Both sides hashed first: equal-length digests, so the comparison takes the same time whatever
// the guess's length (and a multi-byte guess cannot make timingSafeEqual throw).
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();
const same = (a: string, b: string) => timingSafeEqual(sha256(a), sha256(b));

/** " Secure" when the browser came over HTTPS (a TLS-terminating proxy says so in X-Forwarded-Proto). */
const secureFlag = (req: FastifyRequest) =>
  req.protocol === 'https' || req.headers['x-forwarded-proto'] === 'https' ? ' Secure;' : '';

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** The headers on every answer: the page's CSP, no framing, no sniffing, not cached unless said. */
const PAGE_HEADERS = {
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'content-security-policy': CSP,
};
function secure(reply: FastifyReply): FastifyReply {
  reply.headers(PAGE_HEADERS);
  if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  return reply;
}

/** Login attempts per address and minute; past it, 429. */
const LOGINS_PER_MINUTE = 20;

/** Bodies above this are refused (413). */
const MAX_BODY = 64 * 1024;
/** How long an action's answer waits for its audit row. */
const AUDIT_WAIT_MS = 2_000;
/** Seconds without a change after which the update stream writes a comment (idle proxies close it). */
const KEEPALIVE_SECONDS = 15;

/** A JSON object; anything else is a 400 naming what is wrong. Fields are the routes' to check. */
function parseJsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = text.trim() ? JSON.parse(text) : {};
  } catch (err) {
    throw new HttpError(
      400,
      `body: not valid JSON (${(err as Error).message}); send a JSON object, e.g. {"reason": "..."}`,
    );
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new HttpError(
      400,
      `body: must be a JSON object, e.g. {"reason": "..."}, not ${JSON.stringify(value)}`,
    );
  return value as Record<string, unknown>;
}

/** The first field whose value holds a NUL character, anywhere inside it. */
function fieldWithNul(fields: Record<string, unknown>): string | undefined {
  const hasNul = (v: unknown): boolean =>
    typeof v === 'string'
      ? v.includes('\u0000')
      : v !== null && typeof v === 'object' && Object.entries(v).some(([k, x]) => hasNul(k) || hasNul(x));
  return Object.entries(fields).find(([k, v]) => hasNul(k) || hasNul(v))?.[0];
}

/** The host of an Origin header; `null` (sandboxed or opaque origins) or garbage is a 400. */
function originHost(origin: string): string {
  try {
    return new URL(origin).host;
  } catch {
    throw new HttpError(
      400,
      `header Origin: ${JSON.stringify(origin.slice(0, 100))} is not an origin; send the request from the page itself`,
    );
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    session: Session | null;
    /** What a state-changing request acted on, for web_actions (a route sets it where the path does not say). */
    auditTarget: string | null;
  }
}

/** Single-user mode's person has every role. */
const SINGLE_USER = { ...ONE_USER, roles: ROLES };

/** A short HTML answer (sign-in refusals, the hop home after a sign-in), escaped. */
const htmlPage = (text: string, link = '<a href="/">Back to tidemark</a>') =>
  `<!doctype html><meta charset="utf-8"><title>tidemark</title><p>${text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)}</p><p>${link}</p>`;

const formField = (body: unknown, name: string) =>
  new URLSearchParams(typeof body === 'string' ? body : '').get(name) ?? '';

export async function startWebServer(o: WebOptions): Promise<{ url: string; stop(): Promise<void> }> {
  const now = o.now ?? (() => new Date());
  const ttlMs = parseDuration(o.config.TIDEMARK_WEB_SESSION_TTL)!;
  const metrics = o.metrics ?? {
    registry: createMetrics({
      db: o.db,
      catalog: o.catalog,
      client: o.client,
      taskQueues: [o.config.TIDEMARK_TASK_QUEUE, watchQueueOf(o.config)],
    }).registry,
  };
  const deps = webDeps({ db: o.db, client: o.client, catalog: o.catalog, config: o.config, now });
  const store = sessionStore(o.db, now, ttlMs, !!o.config.TIDEMARK_OIDC_ISSUER);
  const c = o.config;
  const oidc = c.TIDEMARK_OIDC_ISSUER
    ? oidcLogin(
        {
          issuer: c.TIDEMARK_OIDC_ISSUER,
          clientId: c.TIDEMARK_OIDC_CLIENT_ID!,
          ...(c.TIDEMARK_OIDC_CLIENT_SECRET ? { clientSecret: c.TIDEMARK_OIDC_CLIENT_SECRET } : {}),
          webUrl: c.TIDEMARK_WEB_URL!,
          scopes: c.TIDEMARK_OIDC_SCOPES,
          nameClaim: c.TIDEMARK_OIDC_NAME_CLAIM,
          rolesClaim: c.TIDEMARK_OIDC_ROLES_CLAIM,
          grants: c.TIDEMARK_OIDC_ROLES,
        },
        o.db,
        now,
      )
    : null;
  // Single-user mode is the shared token's; with an identity provider, the token opens nothing.
  const sharedToken = oidc ? undefined : o.token;
  if (!oidc && !sharedToken)
    throw new Error(
      'the page needs a way in: TIDEMARK_OIDC_ISSUER (sign-in through the identity provider) or TIDEMARK_WEB_TOKEN (single-user mode)',
    );
  const cookieOf = (req: FastifyRequest) => store.cookieOf(req.headers.cookie);

  const tokens = tokenStore(o.db, now);
  /** Records a change and who made it in web_actions; a failure to record is logged, not thrown. */
  const recordAction = (actor: Actor, action: string, job: string | null, target: string | null) =>
    o.db
      .insertInto('web_actions')
      .values({
        action,
        job,
        target,
        actor: actor.name || actor.displayName,
        subject: actor.subject,
        display_name: actor.displayName,
        credential: actor.credential,
        verified: actor.verified,
      })
      .execute()
      .then(
        () => undefined,
        (err: Error) => logger.error(`web action ${action} done but not audited: ${redact(err.message)}`),
      );
  async function sessionOf(req: FastifyRequest): Promise<Session | null> {
    const auth = req.headers.authorization;
    if (sharedToken && auth?.startsWith('Bearer ') && same(auth.slice(7), sharedToken))
      return { csrf: '', expires: Infinity, actor: { ...SINGLE_USER, credential: 'token:shared' } };
    // A personal token (web/tokens.ts): its maker, with its role; revoked or expired, nobody.
    if (oidc && auth?.startsWith('Bearer tmk_')) {
      const bearer = auth.slice(7);
      const actor = await tokens.actorOf(bearer);
      if (actor) return { csrf: '', expires: Infinity, actor, live: () => tokens.live(bearer) };
    }
    return cookieSessionOf(req);
  }
  /** The login cookie's session, whatever else the request carries. */
  const cookieSessionOf = (req: FastifyRequest) => store.get(cookieOf(req));
  /**
   * Whether `accepted` lets a request in. One that presents a bearer token is refused at once (429)
   * while its address has guessed wrong too often, the right token too (a throttle that let the
   * right answer through would tell a guesser when it is right); a wrong one counts as a guess.
   */
  async function admitted(req: FastifyRequest, accepted: () => Promise<boolean>): Promise<boolean> {
    const bearer = req.headers.authorization?.startsWith('Bearer ') ?? false;
    if (bearer && guesses.over(req.ip))
      throw new HttpError(
        429,
        'too many failed logins from this address in the last minute; wait a minute and try again',
      );
    const ok = await accepted();
    if (!ok && bearer) guesses.fail(req.ip);
    return ok;
  }
  /** Still logged in: a bearer client always, a cookie session until it expires or logs out. */
  const live = async (s: Session) => (s.live ? await s.live() : !s.id || (await store.live(s.id)));

  const logger = o.logger ?? consoleLogger('[web] ');
  const redact = redactorFromConfig(o.config);
  const guesses = guessThrottle(LOGINS_PER_MINUTE, 60_000);
  const app = Fastify({
    bodyLimit: MAX_BODY,
    // Behind the TLS proxy: the client's address (what the throttles key on) from X-Forwarded-For.
    ...trustProxyOf(o.config.TIDEMARK_WEB_TRUST_PROXY),
    forceCloseConnections: true,
    // What fails before routing (a path whose percent-encoding does not decode) reaches neither a
    // route nor the error handler: answered here in the page's format, never fastify's own (its
    // codes and internals), with the headers of every answer (no onSend hook runs for it).
    frameworkErrors: (err, req, reply) =>
      secure(reply)
        .code(err.code === 'FST_ERR_BAD_URL' ? 400 : (err.statusCode ?? 400))
        .send({
          error:
            err.code === 'FST_ERR_BAD_URL'
              ? `path: ${JSON.stringify(req.url.slice(0, 200))} is not a valid URL (a % must start an escape such as %2F); encode each segment with encodeURIComponent`
              : 'bad request',
        }),
  });
  // Every body is read as text and parsed where it is used (a form for /login and /logout, a JSON
  // object for the API), so a wrong content type is the same clear 400 as a wrong body.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.decorateRequest('session', null);
  app.decorateRequest('auditTarget', null);

  app.addHook('onSend', async (_req, reply, payload) => {
    secure(reply);
    return payload;
  });

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      // The connection closes after it, so no later request lands on a half-read one.
      return reply
        .code(413)
        .header('connection', 'close')
        .send({ error: `body: larger than ${req.routeOptions.bodyLimit ?? MAX_BODY} bytes` });
    const status =
      err instanceof HttpError
        ? err.status
        : err.code === 'UNKNOWN_JOB'
          ? 404
          : err.statusCode && err.statusCode >= 400 && err.statusCode < 500
            ? err.statusCode
            : 500;
    if (status < 500) return reply.code(status).send({ error: err.message });
    // The cause (a host name, a driver's words) is the operator's, in the log under a reference.
    const reference = randomUUID();
    logger.error(
      `web 500 reference=${reference} ${req.method} ${req.url.split('?')[0]}: ${redact(err.stack ?? err.message)}`,
      { reference },
    );
    return reply
      .code(500)
      .send({ error: `internal error (reference ${reference}); the page's server logged its cause` });
  });
  // The same answer with a token or without: an unknown path tells a guesser nothing.
  app.setNotFoundHandler((_req, reply) => reply.code(404).send({ error: 'not found' }));

  // The page's files; index.html is served by the route below (it carries the session's CSRF token).
  await app.register(fastifyStatic, {
    root: PUBLIC_DIR,
    index: false,
    cacheControl: false,
    allowedPath: (path) => path !== '/index.html',
  });

  app.get('/', async (req, reply) => {
    // The page itself knows only the cookie's session: a bearer token here would be an oracle.
    const s = req.headers.authorization ? await cookieSessionOf(req) : await sessionOf(req);
    const html = (await readFile(`${PUBLIC_DIR}index.html`, 'utf8'))
      .replaceAll('%CSRF%', s?.csrf ?? '')
      .replace('data-mode="single-user"', `data-mode="${oidc ? 'oidc' : 'single-user'}"`);
    return reply
      .type('text/html; charset=utf-8')
      .send(s ? html : html.replace('data-auth="yes"', 'data-auth="no"'));
  });

  // The runbook the alerts link to: no sign-in, it holds no job data (web/routes/runbook.ts).
  await runbookRoutes(app);

  // The scrape token's (TIDEMARK_METRICS_TOKEN) or a logged-in person's: job names and counts are
  // not for strangers, and each reading costs the database and Temporal (shared a few seconds).
  app.get('/metrics', async (req, reply) => {
    const scrapeToken = o.config.TIDEMARK_METRICS_TOKEN;
    const scraper = (req: FastifyRequest) =>
      scrapeToken !== undefined && bearerIs(req.headers.authorization, scrapeToken);
    if (!(await admitted(req, async () => scraper(req) || (await sessionOf(req)) !== null)))
      throw new HttpError(
        401,
        'log in first, or scrape with Authorization: Bearer <TIDEMARK_METRICS_TOKEN> (set it on the page)',
      );
    return reply
      .type(metrics.registry.contentType)
      .send(await metricsText(metrics.registry, metrics.sdkMetricsUrl));
  });

  // Guessing the token is slowed to LOGINS_PER_MINUTE tries per address (the right token too, once
  // past it: a throttle that let the right answer through would tell a guesser when it is right).
  await app.register(fastifyRateLimit, { global: false });
  const loginLimit = {
    max: LOGINS_PER_MINUTE,
    timeWindow: 60_000,
    errorResponseBuilder: () =>
      new HttpError(429, 'too many logins from this address in the last minute; wait a minute and try again'),
  };

  const sessionCookie = (req: FastifyRequest, cookie: string) =>
    `tidemark_session=${cookie}; HttpOnly; SameSite=Strict;${secureFlag(req)} Path=/; Max-Age=${Math.floor(ttlMs / 1000)}`;

  app.post('/login', { config: { rateLimit: loginLimit } }, async (req, reply) => {
    if (!sharedToken)
      throw new HttpError(
        404,
        'this page signs people in through the identity provider (GET /auth/login); the shared token is single-user mode only',
      );
    if (!same(formField(req.body, 'token'), sharedToken))
      return reply
        .code(401)
        .type('text/html; charset=utf-8')
        .send('<p>Wrong token. <a href="/">Try again</a></p>');
    const { cookie } = await store.open(SINGLE_USER);
    return reply.code(303).header('location', '/').header('set-cookie', sessionCookie(req, cookie)).send('');
  });

  // Sign-in through the identity provider: off to it with PKCE, back with a code (web/oidc.ts).
  // The login cookie is SameSite=Lax: it must come back on the provider's redirect, a cross-site one.
  const loginCookie = (req: FastifyRequest, value: string, maxAge: number) =>
    `tidemark_login=${value}; HttpOnly; SameSite=Lax;${secureFlag(req)} Path=/auth/; Max-Age=${maxAge}`;
  if (oidc) {
    app.get('/auth/login', { config: { rateLimit: loginLimit } }, async (req, reply) => {
      const { url, state } = await oidc.begin();
      return reply
        .code(302)
        .header('location', url)
        .header('set-cookie', loginCookie(req, state, 600))
        .send('');
    });
    app.get('/auth/callback', { config: { rateLimit: loginLimit } }, async (req, reply) => {
      const query = req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '';
      const state = /(?:^|;\s*)tidemark_login=([A-Za-z0-9_-]{20,100})/.exec(req.headers.cookie ?? '')?.[1];
      const result = await oidc.finish(query, state);
      reply.header('set-cookie', [loginCookie(req, '', 0)]);
      if ('refused' in result) {
        logger.warn(`web sign-in refused: ${redact(result.refused)}`);
        return reply
          .code(403)
          .type('text/html; charset=utf-8')
          .send(htmlPage(`Not signed in: ${result.refused}`, '<a href="/auth/login">Sign in again</a>'));
      }
      const { cookie } = await store.open(result.who);
      logger.info(
        `web sign-in: ${result.who.name} (${result.who.subject}) as ${result.who.roles.join(', ')}`,
      );
      // Home through a page of the page's own: a SameSite=Strict cookie set at the end of a
      // cross-site redirect would not be sent with a redirect's next request.
      return reply
        .code(200)
        .header('set-cookie', [loginCookie(req, '', 0), sessionCookie(req, cookie)])
        .type('text/html; charset=utf-8')
        .send(
          '<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/"><title>tidemark</title><p>Signed in. <a href="/">Go to tidemark</a></p>',
        );
    });
  }

  // The CLI's sign-in (`tidemark login`): the device flow, run by the page (it is the provider's
  // client); a person who signs in gets a token of their own for the CLI, with their roles.
  if (oidc) {
    const deviceLimit = { ...loginLimit, max: LOGINS_PER_MINUTE * 3 };
    app.post('/auth/device', { config: { rateLimit: deviceLimit } }, async () => oidc.deviceStart());
    app.post('/auth/device/token', { config: { rateLimit: deviceLimit } }, async (req, reply) => {
      const body = parseJsonObject(typeof req.body === 'string' ? req.body : '');
      if (typeof body.deviceCode !== 'string' || !body.deviceCode)
        throw new HttpError(400, 'deviceCode: the device code POST /auth/device answered');
      const result = await oidc.deviceFinish(body.deviceCode);
      if ('pending' in result) return reply.code(202).send(result);
      if ('refused' in result) throw new HttpError(403, result.refused);
      const label = typeof body.label === 'string' ? body.label : '';
      const made = await tokens.forCli(result.who, label, ttlMs);
      await recordAction(
        { ...result.who, credential: `token:${made.row.id}` },
        'POST /auth/device/token',
        null,
        made.row.id,
      );
      logger.info(
        `cli sign-in: ${result.who.name} (${result.who.subject}) as ${result.who.roles.join(', ')}, token ${made.row.id}`,
      );
      return {
        token: made.token,
        id: made.row.id,
        name: result.who.name,
        displayName: result.who.displayName,
        roles: result.who.roles,
        expiresAt: made.row.expiresAt,
      };
    });
  }

  app.post('/logout', async (req, reply) => {
    const id = cookieOf(req);
    const s = await store.get(id);
    if (s && !same(formField(req.body, 'csrf'), s.csrf))
      throw new HttpError(403, 'missing or wrong CSRF token');
    if (id) await store.end(id);
    if (s) await recordAction(s.actor, 'POST /logout', null, null);
    return reply
      .code(303)
      .header('location', '/')
      .header(
        'set-cookie',
        `tidemark_session=; HttpOnly; SameSite=Strict;${secureFlag(req)} Path=/; Max-Age=0`,
      )
      .send('');
  });

  // The codec server for the Temporal Web UI: its own scope and rules (web/routes/codec.ts), since
  // the Web UI calls it from its own origin; the /api rules below stay as they are.
  const codec = payloadCodecOf({
    TIDEMARK_PAYLOAD_KEYS: o.config.TIDEMARK_PAYLOAD_KEYS,
    TIDEMARK_PAYLOAD_KEYS_FILE: o.config.TIDEMARK_PAYLOAD_KEYS_FILE,
  });
  const codecToken = o.config.TIDEMARK_CODEC_TOKEN;
  await app.register(async (scope: FastifyInstance) =>
    codecRoutes(scope, {
      codec,
      origins: o.config.TIDEMARK_CODEC_ORIGINS?.length
        ? o.config.TIDEMARK_CODEC_ORIGINS
        : [new URL(o.config.TIDEMARK_WEB_UI_URL).origin],
      namespace: o.config.TEMPORAL_NAMESPACE,
      // A wrong codec or page token counts as a guess here too (429 past the limit).
      authorized: async (req) => {
        let roles: readonly string[] | null = null;
        await admitted(req, async () => {
          const auth = req.headers.authorization;
          if (codecToken && auth?.startsWith('Bearer ') && same(auth.slice(7), codecToken)) roles = ROLES;
          else roles = (await sessionOf(req))?.actor.roles ?? null;
          return roles !== null;
        });
        return roles;
      },
    }),
  );

  // Everything under /api: a session first (401), then for a state-changing request a same-origin
  // Origin and the session's CSRF token (403), all before the body is read; the body must then be
  // a JSON object (400). Route modules inside this scope do no auth of their own.
  await app.register(async (api: FastifyInstance) => {
    api.addHook('onRequest', async (req) => {
      let found: Session | null = null;
      await admitted(req, async () => (found = await sessionOf(req)) !== null);
      const s = found as Session | null;
      if (!s) throw new HttpError(401, 'log in first');
      req.session = s;
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        const origin = req.headers.origin;
        if (origin !== undefined && originHost(origin) !== req.headers.host)
          throw new HttpError(403, 'cross-site request refused');
        if (s.csrf && !same(String(req.headers['x-csrf-token'] ?? ''), s.csrf))
          throw new HttpError(403, 'missing or wrong CSRF token');
      }
      // A route that does not exist answers 404 below, whoever asks.
      const need = roleFor(req.method, req.routeOptions.url);
      if (req.routeOptions.url && !hasRole(s.actor.roles, need))
        throw new HttpError(
          403,
          `this needs the ${need} role (${ROLE_DOES[need]}); ${s.actor.name || s.actor.displayName} has ${s.actor.roles.join(', ') || 'none'}: ask for it through your identity provider's groups`,
        );
    });
    api.addHook('preValidation', async (req) => {
      if (req.method !== 'GET' && req.method !== 'HEAD')
        req.body = parseJsonObject(typeof req.body === 'string' ? req.body : '');
      // PostgreSQL text cannot hold a NUL: refused here, naming the field, not a 500 from the
      // first insert (or, for a rerun request, never recorded by the workers).
      const field = fieldWithNul({
        ...(req.params as object),
        ...(req.query as object),
        ...(req.body as object | undefined),
      });
      if (field)
        throw new HttpError(
          400,
          `${field}: contains a NUL character (\\u0000), which cannot be stored; remove it`,
        );
    });

    // Each change made through the page, with who made it (web_actions): read on a window's detail.
    // Recorded before the answer is sent: whoever sees the answer finds the change in the audit. An
    // insert held up (a lock, a full pool) does not hold the answer of an action already done past
    // AUDIT_WAIT_MS (a proxy's time-out would say it failed, and invite doing it again): it lands later.
    api.addHook('onSend', async (req, reply, payload) => {
      const s = req.session;
      if (req.method === 'GET' || req.method === 'HEAD' || reply.statusCode >= 400 || !s) return payload;
      const params = (req.params ?? {}) as Record<string, string | undefined>;
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((r) => (timer = setTimeout(r, AUDIT_WAIT_MS)));
      const recorded = recordAction(
        s.actor,
        `${req.method} ${req.routeOptions.url ?? req.url.split('?')[0]}`,
        params.job ?? null,
        req.auditTarget ?? params.key ?? params.windowKey ?? params.id ?? null,
      );
      await Promise.race([recorded, waited]).finally(() => clearTimeout(timer));
      return payload;
    });
    api.get('/api/state', async () => deps.overview());
    // Who the page acts as, and how people sign in: the page shows what one may do, no more.
    api.get('/api/me', async (req) => {
      const a = req.session!.actor;
      return {
        mode: oidc ? 'oidc' : 'single-user',
        name: a.name,
        displayName: a.displayName,
        subject: a.subject,
        roles: a.roles,
        verified: a.verified,
      };
    });
    api.get('/api/events', (req, reply) => events(req, reply));
    for (const routes of routeModules) await routes(api, deps);
    await tokenRoutes(api, tokens);
  });

  // Every open page's stream shares one reading a second, taken while anyone has the page open, and
  // is sent what changed since its last update. /api/state reads its own.
  const hub = overviewHub(deps.overview);

  /**
   * The update stream: the whole state first, then (event "changes") the rows that changed, each
   * within a second; a comment when nothing changed for a while, so that no proxy drops it as idle.
   * Ends when the client goes, the session expires or logs out, or the reading fails.
   */
  async function events(req: FastifyRequest, reply: FastifyReply) {
    reply.hijack();
    const res = reply.raw;
    // Hijacked, so past the onSend hook: the page's headers are written here.
    res.writeHead(200, {
      ...PAGE_HEADERS,
      'content-type': 'text/event-stream',
      'cache-control': 'no-store',
      connection: 'keep-alive',
    });
    let open = true;
    req.raw.on('close', () => (open = false));
    res.on('close', () => (open = false));
    const leave = hub.join();
    try {
      let mine = 0;
      let quiet = 0;
      while (open && (await live(req.session!))) {
        const u = await hub.next(mine, 1_000);
        if (u) {
          res.write(`${u.event === 'message' ? '' : `event: ${u.event}\n`}data: ${u.data}\n\n`);
          mine = u.version;
          quiet = 0;
        } else if (++quiet >= KEEPALIVE_SECONDS) {
          res.write(': nothing changed\n\n');
          quiet = 0;
        }
      }
    } catch {
      // The database or Temporal went away mid-stream (or the server is stopping): end the stream;
      // the page's EventSource reconnects and gets a clear answer then.
    } finally {
      leave();
    }
    // Ended, not left hanging: the page's EventSource reconnects, is refused, and shows the login.
    res.end();
  }

  const host = o.host ?? '127.0.0.1';
  await app.listen({ port: o.port, host });
  const { port } = app.server.address() as { port: number };
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return { url: `http://${shown}:${port}`, stop: () => app.close() };
}
