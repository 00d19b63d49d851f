// A worker's probe server: /metrics (tidemark's and the Temporal SDK's), /healthz (the process
// answers) and /readyz (the worker polls its task queue, PostgreSQL and Temporal answer), for
// Prometheus, Kubernetes and compose. Nothing here needs a login, and nothing here is a secret.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import { guessThrottle } from './guesses.js';
import type { AddressInfo } from 'node:net';
import type { Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import { sql, type Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { Database } from '../db/schema.js';

export interface ReadinessParts {
  /** The process's workers (one per task queue it polls), once created. Ready while each runs and polls. */
  workers: () => readonly Pick<Worker, 'getStatus' | 'options'>[];
  db: Kysely<Database>;
  temporal: Pick<Connection, 'withDeadline' | 'workflowService'>;
  timeoutMs?: number;
  /** Removes secrets from error text before it is answered. */
  redact?: (text: string) => string;
}

export interface Readiness {
  ready: boolean;
  /** Each part: "ok", or what is wrong with it. */
  checks: { workers: string; postgres: string; temporal: string };
}

async function within(ms: number, work: () => Promise<unknown>): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      work(),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms))),
    ]);
    return 'ok';
  } catch (err) {
    return err instanceof Error ? err.message || err.name : String(err);
  } finally {
    clearTimeout(timer);
  }
}

export async function readiness(p: ReadinessParts): Promise<Readiness> {
  const ms = p.timeoutMs ?? 2_000;
  const redact = p.redact ?? ((t: string) => t);
  const workers = p.workers();
  const problems = workers.flatMap((w) => {
    const s = w.getStatus();
    const queue = `task queue "${w.options.taskQueue}"`;
    if (s.runState !== 'RUNNING') return [`${queue}: state ${s.runState}`];
    if (s.workflowPollerState !== 'POLLING' || s.activityPollerState !== 'POLLING')
      return [`${queue}: pollers workflow ${s.workflowPollerState}, activity ${s.activityPollerState}`];
    return [];
  });
  const worker = workers.length === 0 ? 'not created yet' : problems.length ? problems.join('; ') : 'ok';
  const [postgres, temporal] = await Promise.all([
    within(ms, () => sql`select 1`.execute(p.db)),
    within(ms, () =>
      p.temporal.withDeadline(Date.now() + ms, () => p.temporal.workflowService.getSystemInfo({})),
    ),
  ]);
  const checks = { workers: worker, postgres: redact(postgres), temporal: redact(temporal) };
  return { ready: Object.values(checks).every((c) => c === 'ok'), checks };
}

/** The probe port when TIDEMARK_METRICS_PORT is unset (the usual Prometheus exporter port). */
export const DEFAULT_METRICS_PORT = 9464;

export interface ProbeServerOptions {
  host: string;
  /**
   * 0: any free port; unset: DEFAULT_METRICS_PORT, or any free port when another process has it (a
   * second worker on the host); a port that was asked for and is taken is an error.
   */
  port: number | undefined;
  registry: Registry;
  /** The Temporal SDK's own Prometheus endpoint, whose text is appended to /metrics. */
  sdkMetricsUrl?: string;
  /** Without it, /readyz answers as /healthz does (a process with no worker, such as the page's). */
  ready?: () => Promise<Readiness>;
  /** TIDEMARK_METRICS_TOKEN: when set, /metrics answers `Authorization: Bearer <it>` alone. */
  token?: string;
  /** The clock the throttle of wrong scrape tokens counts by; default Date.now. */
  now?: () => number;
}

export interface ProbeServer {
  /** e.g. http://127.0.0.1:9464 */
  readonly url: string;
  stop(): Promise<void>;
}

async function sdkText(url: string): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
    if (res.ok) return await res.text();
    return `# the Temporal SDK's metrics answered ${res.status}\n`;
  } catch (err) {
    return `# the Temporal SDK's metrics could not be read: ${(err as Error).message}\n`;
  }
}

/** Whether an Authorization header carries `token` as its bearer (compared in constant time). */
export function bearerIs(header: string | undefined, token: string): boolean {
  if (!header?.startsWith('Bearer ')) return false;
  const digest = (t: string) => createHash('sha256').update(t, 'utf8').digest();
  return timingSafeEqual(digest(header.slice(7)), digest(token));
}

/** The /metrics answer: tidemark's metrics, then the SDK's (when it has an endpoint). */
export async function metricsText(registry: Registry, sdkMetricsUrl?: string): Promise<string> {
  const [own, sdk] = await Promise.all([registry.metrics(), sdkMetricsUrl ? sdkText(sdkMetricsUrl) : '']);
  return sdk ? `${own}\n${sdk}` : own;
}

/** Wrong scrape tokens per address and minute; past it, 429. */
const SCRAPE_GUESSES_PER_MINUTE = 20;

export async function startProbeServer(o: ProbeServerOptions): Promise<ProbeServer> {
  const send = (res: ServerResponse, status: number, type: string, body: string) => {
    res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
    res.end(body);
  };
  const json = 'application/json';
  const guesses = guessThrottle(SCRAPE_GUESSES_PER_MINUTE, 60_000, o.now);
  const server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? '/', 'http://probe').pathname;
      try {
        if (req.method !== 'GET' && req.method !== 'HEAD')
          return send(res, 405, json, '{"error":"GET only"}');
        if (path === '/healthz') return send(res, 200, json, '{"status":"alive"}');
        if (path === '/readyz') {
          if (!o.ready) return send(res, 200, json, '{"ready":true}');
          const r = await o.ready();
          return send(res, r.ready ? 200 : 503, json, JSON.stringify(r));
        }
        if (path === '/metrics') {
          // Guessing the scrape token is slowed per address, as the page's login is.
          const from = req.socket.remoteAddress ?? '';
          if (o.token && guesses.over(from))
            return send(
              res,
              429,
              json,
              '{"error":"too many wrong scrape tokens from this address in the last minute; wait a minute"}',
            );
          if (o.token && !bearerIs(req.headers.authorization, o.token)) {
            guesses.fail(from);
            return send(
              res,
              401,
              json,
              '{"error":"scrape with Authorization: Bearer <TIDEMARK_METRICS_TOKEN>"}',
            );
          }
          return send(res, 200, o.registry.contentType, await metricsText(o.registry, o.sdkMetricsUrl));
        }
        send(res, 404, json, '{"error":"not found: try /metrics, /healthz or /readyz"}');
      } catch (err) {
        send(res, 500, json, JSON.stringify({ error: (err as Error).message }));
      }
    })();
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, o.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
  try {
    await listen(o.port ?? DEFAULT_METRICS_PORT).catch(async (err: NodeJS.ErrnoException) => {
      if (o.port === undefined && err.code === 'EADDRINUSE') return await listen(0);
      throw err;
    });
  } catch (err) {
    throw new Error(
      `the metrics and health server cannot listen on ${o.host}:${o.port ?? DEFAULT_METRICS_PORT} (${(err as Error).message}): set TIDEMARK_METRICS_PORT (0: any free port) or TIDEMARK_METRICS_HOST`,
    );
  }
  const { port } = server.address() as AddressInfo;
  const host = o.host === '0.0.0.0' || o.host === '::' ? '127.0.0.1' : o.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** A free loopback address for the SDK's own endpoint, which /metrics reads and appends. */
export async function freeLoopbackAddress(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port } = probe.address() as AddressInfo;
  await new Promise((r) => probe.close(r));
  return `127.0.0.1:${port}`;
}
