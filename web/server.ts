// The management page: jobs, a heat map of each job's windows, pending approvals, and buttons to
// trigger, pause, resume, backfill and request a rerun. Access needs the token (a login form sets
// an HttpOnly, SameSite=Strict session cookie; API clients may send `Authorization: Bearer`);
// every state-changing request must carry the session's CSRF token and a same-origin Origin.
// Sessions expire (TIDEMARK_WEB_SESSION_TTL) and can log out. Updates arrive without a reload
// over server-sent events. Bad input is a 400 that names the field, never a 500. /metrics needs no
// login (a Prometheus scrape has no session): counts and job names only, never a secret.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import { watchQueueOf, type Config } from '../config/env.js';
import type { Database } from '../db/schema.js';
import { jobsOverview, recentWindows } from '../operator/overview.js';
import { directoryOf, requesterProblem } from '../config/people.js';
import {
  NotAWindowStart,
  requestRerun,
  requestState,
  RequestNotRecorded,
  RequestRefused,
} from '../operator/reruns.js';
import type { Catalog } from '../schedules/job.js';
import { scheduleIdOf } from '../schedules/sync.js';
import { parseDuration } from '../schedules/duration.js';
import { isoUtc, windowsInRange } from '../schedules/windows.js';
import { createMetrics } from '../workers/metrics.js';
import { metricsText } from '../workers/probes.js';
import { searchAttributes } from '../workflows/search-attributes.js';
import { MAX_BATCH } from '../workflows/types.js';
import { SCRIPT } from './client.js';
import { PAGE, STYLE } from './page.js';

export interface WebOptions {
  port: number;
  token: string;
  db: Kysely<Database>;
  client: Client;
  catalog: Catalog;
  config: Config;
  /** The clock sessions expire by; default the system clock. */
  now?: () => Date;
  /** What /metrics serves; default the deployment's gauges and this process's own metrics. */
  metrics?: { registry: Registry; sdkMetricsUrl?: string };
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// Both sides hashed first: equal-length digests, so the comparison takes the same time whatever
// the guess's length (and a multi-byte guess cannot make timingSafeEqual throw).
const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest();
const same = (a: string, b: string) => timingSafeEqual(sha256(a), sha256(b));

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/** A JSON object of string (or boolean) fields; anything else is a 400 naming what is wrong. */
function parseBody(text: string): Record<string, string> {
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
  const out: Record<string, string> = {};
  for (const [field, v] of Object.entries(value)) {
    if (typeof v !== 'string' && typeof v !== 'boolean')
      throw new HttpError(400, `field ${field}: must be a string, not ${JSON.stringify(v)}`);
    out[field] = String(v);
  }
  return out;
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

/** Bodies above this are refused (413). */
const MAX_BODY = 64 * 1024;
/**
 * A refused body is read on (and dropped) up to this much, so the client hears the 413 instead of a
 * reset; the connection then closes, so no later request lands on a half-read one.
 */
const MAX_DRAIN = 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_DRAIN) break;
    if (size <= MAX_BODY) chunks.push(c as Buffer);
  }
  if (size > MAX_BODY) throw new HttpError(413, `body: larger than ${MAX_BODY} bytes`);
  return Buffer.concat(chunks).toString('utf8');
}

export async function startWebServer(o: WebOptions): Promise<{ url: string; stop(): Promise<void> }> {
  const now = o.now ?? (() => new Date());
  const ttlMs = parseDuration(o.config.TIDEMARK_WEB_SESSION_TTL)!;
  const maxBackfill = o.config.TIDEMARK_WEB_MAX_BACKFILL_WINDOWS;
  const metrics = o.metrics ?? {
    registry: createMetrics({
      db: o.db,
      catalog: o.catalog,
      client: o.client,
      taskQueues: [o.config.TIDEMARK_TASK_QUEUE, watchQueueOf(o.config)],
    }).registry,
  };
  const sessions = new Map<string, { csrf: string; expires: number }>();
  const cookieOf = (req: IncomingMessage) =>
    /(?:^|;\s*)tidemark_session=([a-f0-9]{64})/.exec(req.headers.cookie ?? '')?.[1];

  function session(req: IncomingMessage): { csrf: string } | null {
    const auth = req.headers.authorization;
    if (auth?.startsWith('Bearer ') && same(auth.slice(7), o.token)) return { csrf: '' };
    const id = cookieOf(req);
    const s = id ? sessions.get(id) : undefined;
    if (!id || !s) return null;
    if (now().getTime() >= s.expires) {
      sessions.delete(id);
      return null;
    }
    return s;
  }
  const live = (s: { csrf: string }) =>
    !s.csrf || [...sessions.values()].some((x) => x === s && now().getTime() < x.expires);

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const json = typeof body !== 'string';
    res.writeHead(status, {
      'content-type': json ? 'application/json' : 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'x-frame-options': 'DENY',
      'x-content-type-options': 'nosniff',
      'content-security-policy': CSP,
      ...headers,
    });
    res.end(json ? JSON.stringify(body) : body);
  };

  async function act(path: string, body: Record<string, string>): Promise<unknown> {
    const m = /^\/api\/jobs\/([a-z][a-z0-9-]*)\/(trigger|pause|resume|backfill|rerun)$/.exec(path);
    if (!m) throw new HttpError(404, 'no such action');
    const job = o.catalog.get(m[1]!);
    const handle = o.client.schedule.getHandle(scheduleIdOf(job.name));
    switch (m[2]) {
      case 'trigger':
        await handle.trigger();
        return { ok: true };
      case 'pause':
        await handle.pause(body.reason || 'paused from the management page');
        return { ok: true };
      case 'resume':
        await handle.unpause('resumed from the management page');
        return { ok: true };
      case 'backfill': {
        const from = new Date(body.from ?? '');
        const to = new Date(body.to ?? '');
        if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()) || !(from < to))
          throw new HttpError(400, 'from and to must be instants with from before to');
        // Optional: consecutive windows per activity (each still its own transaction); empty means one per run.
        const batchText = (body.batch ?? '').trim();
        const batch = batchText === '' ? undefined : Number(batchText);
        if (batch !== undefined && !(Number.isInteger(batch) && batch >= 1 && batch <= MAX_BATCH))
          throw new HttpError(
            400,
            `batch: ${JSON.stringify(batchText.slice(0, 40))} is not a whole number from 1 to ${MAX_BATCH} (windows per batch); leave it empty for one window per run`,
          );
        // A typo in a year must not start years of windows: past the limit, only on purpose. Counting
        // stops just past the limit, so a huge range costs nothing to refuse.
        const windows = windowsInRange(job.grid, job.timezone, from, to, maxBackfill + 1).length;
        if (windows > maxBackfill && body.allowLarge !== 'true')
          throw new HttpError(
            400,
            `from, to: ${isoUtc(from)} to ${isoUtc(to)} holds more than ${maxBackfill} windows of ${job.name}; narrow the range, or send "allowLarge": true to start it anyway (the limit is TIDEMARK_WEB_MAX_BACKFILL_WINDOWS)`,
          );
        const workflowId = `${job.name}/backfill-${isoUtc(from)}-${isoUtc(to)}`;
        await o.client.workflow.start('backfill', {
          taskQueue: o.config.TIDEMARK_TASK_QUEUE,
          workflowId,
          workflowIdConflictPolicy: 'USE_EXISTING',
          args: [
            {
              job: job.name,
              from: isoUtc(from),
              to: isoUtc(to),
              concurrency: 4,
              ...(batch ? { batch } : {}),
            },
          ],
          typedSearchAttributes: searchAttributes('backfill', job.name),
          staticSummary: `backfill of ${job.name} from the management page${batch ? `, ${batch} per batch` : ''}`,
        });
        return { ok: true, workflowId };
      }
      default: {
        const start = new Date(body.window ?? '');
        if (Number.isNaN(start.getTime()) || !body.reason)
          throw new HttpError(400, 'window (an instant) and reason are required');
        // The requester by their name, as in the CLI and Slack, so they cannot approve it elsewhere.
        const by = typeof body.by === 'string' ? body.by.trim() : '';
        const problem = requesterProblem(directoryOf(o.config), by);
        if (problem) throw new HttpError(400, `by: ${problem}`);
        const handle2 = await requestRerun(o.client, o.config, {
          job,
          windowStart: start,
          reason: body.reason,
          requestedBy: by,
          now: new Date(),
        }).catch((err: unknown) => {
          throw err instanceof NotAWindowStart
            ? new HttpError(400, `window: ${err.message}: ask for ${isoUtc(err.window.start)}`)
            : err;
        });
        // Wait until the workers have recorded it (its generation reserved): a refusal (never
        // processed, or a rerun of the window already open) is the page's answer, not "ok".
        try {
          const state = await requestState(o.client, handle2.workflowId, 10_000);
          return {
            ok: true,
            request: handle2.workflowId,
            generation: state.request?.window.generation ?? null,
          };
        } catch (err) {
          if (err instanceof RequestRefused) throw new HttpError(409, `window: ${err.message}`);
          // Asked, but no worker has recorded it yet: say so rather than fail.
          if (err instanceof RequestNotRecorded)
            return { ok: true, request: handle2.workflowId, generation: null, note: err.message };
          throw err;
        }
      }
    }
  }

  async function snapshot() {
    const jobs = await jobsOverview(o.db, o.client, o.catalog);
    const windows = Object.fromEntries(
      await Promise.all(
        o.catalog.jobs.map(async (j) => [j.name, (await recentWindows(o.db, j.name, 48)).reverse()] as const),
      ),
    );
    const approvals = await o.db
      .selectFrom('rerun_requests')
      .selectAll()
      .where('status', '=', 'pending')
      .orderBy('requested_at')
      .execute();
    return {
      jobs,
      windows,
      approvals: approvals.map((a) => ({
        request: a.workflow_id,
        job: a.job,
        window: isoUtc(a.window_start),
        generation: a.generation,
        by: a.requested_by,
        reason: a.reason,
      })),
      webUi: `${o.config.TIDEMARK_WEB_UI_URL}/namespaces/${o.config.TEMPORAL_NAMESPACE}/workflows`,
    };
  }

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://local');
      try {
        if (req.method === 'GET' && url.pathname === '/app.js')
          return send(res, 200, SCRIPT, { 'content-type': 'text/javascript; charset=utf-8' });
        if (req.method === 'GET' && url.pathname === '/app.css')
          return send(res, 200, STYLE, { 'content-type': 'text/css; charset=utf-8' });
        if (req.method === 'GET' && url.pathname === '/metrics')
          return send(res, 200, await metricsText(metrics.registry, metrics.sdkMetricsUrl), {
            'content-type': metrics.registry.contentType,
          });
        if (req.method === 'POST' && url.pathname === '/login') {
          const token = new URLSearchParams(await readBody(req)).get('token') ?? '';
          if (!same(token, o.token)) return send(res, 401, '<p>Wrong token. <a href="/">Try again</a></p>');
          const t = now().getTime();
          for (const [k, v] of sessions) if (t >= v.expires) sessions.delete(k);
          const id = randomBytes(32).toString('hex');
          sessions.set(id, { csrf: randomBytes(32).toString('hex'), expires: t + ttlMs });
          return send(res, 303, '', {
            location: '/',
            'set-cookie': `tidemark_session=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(ttlMs / 1000)}`,
          });
        }
        if (req.method === 'POST' && url.pathname === '/logout') {
          const id = cookieOf(req);
          const s = id ? sessions.get(id) : undefined;
          const csrf = new URLSearchParams(await readBody(req)).get('csrf') ?? '';
          if (s && !same(csrf, s.csrf)) throw new HttpError(403, 'missing or wrong CSRF token');
          if (id) sessions.delete(id);
          return send(res, 303, '', {
            location: '/',
            'set-cookie': 'tidemark_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0',
          });
        }
        const s = session(req);
        if (url.pathname === '/')
          return send(
            res,
            200,
            s
              ? PAGE.replaceAll('%CSRF%', s.csrf)
              : PAGE.replaceAll('%CSRF%', '').replace('data-auth="yes"', 'data-auth="no"'),
          );
        if (!s) throw new HttpError(401, 'log in first');
        if (req.method === 'GET' && url.pathname === '/api/state') return send(res, 200, await snapshot());
        if (req.method === 'GET' && url.pathname === '/api/events') {
          res.writeHead(200, {
            'content-type': 'text/event-stream',
            'cache-control': 'no-store',
            connection: 'keep-alive',
          });
          let open = true;
          req.on('close', () => {
            open = false;
          });
          // A session that expires or logs out stops receiving updates.
          while (open && live(s)) {
            res.write(`data: ${JSON.stringify(await snapshot())}\n\n`);
            await new Promise((r) => setTimeout(r, 1_000));
          }
          // Ended, not left hanging: the page's EventSource reconnects, is refused, and shows the login.
          res.end();
          return;
        }
        if (req.method === 'POST' && url.pathname.startsWith('/api/')) {
          const origin = req.headers.origin;
          if (origin !== undefined && originHost(origin) !== req.headers.host)
            throw new HttpError(403, 'cross-site request refused');
          if (s.csrf && !same(String(req.headers['x-csrf-token'] ?? ''), s.csrf))
            throw new HttpError(403, 'missing or wrong CSRF token');
          const body = parseBody(await readBody(req));
          return send(res, 200, await act(url.pathname, body));
        }
        throw new HttpError(404, 'not found');
      } catch (err) {
        const status =
          err instanceof HttpError
            ? err.status
            : (err as { code?: string }).code === 'UNKNOWN_JOB'
              ? 404
              : 500;
        if (!res.headersSent)
          send(res, status, { error: (err as Error).message }, status === 413 ? { connection: 'close' } : {});
        else res.end();
      }
    })();
  });
  await new Promise<void>((r) => server.listen(o.port, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
