// The management page: jobs, a heat map of each job's windows, pending approvals, and buttons to
// trigger, pause, resume, backfill and request a rerun. Access needs the token (a login form sets
// an HttpOnly, SameSite=Strict session cookie; API clients may send `Authorization: Bearer`);
// every state-changing request must carry the session's CSRF token and a same-origin Origin.
// Updates arrive without a reload over server-sent events.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Config } from '../config/env.js';
import type { Database } from '../db/schema.js';
import { jobsOverview, recentWindows } from '../operator/overview.js';
import { directoryOf, requesterProblem } from '../config/people.js';
import { requestRerun } from '../operator/reruns.js';
import type { Catalog } from '../schedules/job.js';
import { scheduleIdOf } from '../schedules/sync.js';
import { isoUtc } from '../schedules/windows.js';
import { searchAttributes } from '../workflows/search-attributes.js';
import { PAGE } from './page.js';

export interface WebOptions {
  port: number;
  token: string;
  db: Kysely<Database>;
  client: Client;
  catalog: Catalog;
  config: Config;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const same = (a: string, b: string) =>
  a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > 64 * 1024) throw new HttpError(413, 'request too large');
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export async function startWebServer(o: WebOptions): Promise<{ url: string; stop(): Promise<void> }> {
  const sessions = new Map<string, { csrf: string }>();

  function session(req: IncomingMessage): { csrf: string } | null {
    const auth = req.headers.authorization;
    if (auth?.startsWith('Bearer ') && same(auth.slice(7), o.token)) return { csrf: '' };
    const id = /(?:^|;\s*)tidemark_session=([a-f0-9]{64})/.exec(req.headers.cookie ?? '')?.[1];
    return (id && sessions.get(id)) || null;
  }

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const json = typeof body !== 'string';
    res.writeHead(status, {
      'content-type': json ? 'application/json' : 'text/html; charset=utf-8',
      'cache-control': 'no-store',
      'x-frame-options': 'DENY',
      'content-security-policy': "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
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
        const workflowId = `${job.name}/backfill-${isoUtc(from)}-${isoUtc(to)}`;
        await o.client.workflow.start('backfill', {
          taskQueue: o.config.TIDEMARK_TASK_QUEUE,
          workflowId,
          workflowIdConflictPolicy: 'USE_EXISTING',
          args: [{ job: job.name, from: isoUtc(from), to: isoUtc(to), concurrency: 4 }],
          typedSearchAttributes: searchAttributes('backfill', job.name),
          staticSummary: `backfill of ${job.name} from the management page`,
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
        });
        return { ok: true, request: handle2.workflowId };
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
        if (req.method === 'POST' && url.pathname === '/login') {
          const token = new URLSearchParams(await readBody(req)).get('token') ?? '';
          if (!same(token, o.token)) return send(res, 401, '<p>Wrong token. <a href="/">Try again</a></p>');
          const id = randomBytes(32).toString('hex');
          sessions.set(id, { csrf: randomBytes(32).toString('hex') });
          return send(res, 303, '', {
            location: '/',
            'set-cookie': `tidemark_session=${id}; HttpOnly; SameSite=Strict; Path=/`,
          });
        }
        const s = session(req);
        if (url.pathname === '/')
          return send(
            res,
            200,
            s
              ? PAGE.replace('%CSRF%', s.csrf)
              : PAGE.replace('%CSRF%', '').replace('data-auth="yes"', 'data-auth="no"'),
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
          while (open) {
            res.write(`data: ${JSON.stringify(await snapshot())}\n\n`);
            await new Promise((r) => setTimeout(r, 1_000));
          }
          return;
        }
        if (req.method === 'POST' && url.pathname.startsWith('/api/')) {
          const origin = req.headers.origin;
          if (origin && new URL(origin).host !== req.headers.host)
            throw new HttpError(403, 'cross-site request refused');
          if (s.csrf && !same(String(req.headers['x-csrf-token'] ?? ''), s.csrf))
            throw new HttpError(403, 'missing or wrong CSRF token');
          const body = JSON.parse((await readBody(req)) || '{}') as Record<string, string>;
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
        if (!res.headersSent) send(res, status, { error: (err as Error).message });
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
