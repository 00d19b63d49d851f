// The codec server for the Temporal Web UI and CLI: POST /codec/decode and /codec/encode in
// Temporal's codec-server protocol (JSON `{ payloads: [{ metadata: {k: base64}, data: base64 }] }`
// in and out, header X-Namespace). Registered by web/server.ts in a scope of its own, outside /api:
// the Web UI calls it from another origin, so instead of the page's same-origin rule an Origin must
// be the page's own or one of the configured Web UI origins (CORS answers only those, with
// credentials, so the page's session cookie works), and every call needs a login (the session
// cookie, the page's bearer token, or the codec-only TIDEMARK_CODEC_TOKEN). A wrong origin is 403
// and no login 401, both before the body is read; without payload keys the routes are a clear 404.
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasRole } from '../../contract/roles.js';
import { HttpError } from '../errors.js';

/** Request bodies up to this size (the Web UI sends a page of history events' payloads at once). */
export const CODEC_MAX_BODY = 4 * 1024 * 1024;
const MAX_PAYLOADS = 1000;

export interface CodecRouteOptions {
  /** Undefined when no payload keys are configured. */
  codec: PayloadCodec | undefined;
  /** The Web UI origins allowed to call cross-origin. */
  origins: readonly string[];
  /** The namespace this deployment's payloads belong to. */
  namespace: string;
  /** Whether the request carries a login (session cookie, page token or codec token). */
  /** The caller's roles; null: not logged in. Decoding needs viewer, encoding admin. */
  authorized: (req: FastifyRequest) => Promise<readonly string[] | null>;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function bytes(value: unknown, field: string): Uint8Array {
  if (typeof value !== 'string' || !BASE64.test(value) || value.length % 4 !== 0)
    throw new HttpError(400, `${field}: must be a base64 string`);
  return new Uint8Array(Buffer.from(value, 'base64'));
}

const b64 = (b: Uint8Array | null | undefined) => Buffer.from(b ?? new Uint8Array()).toString('base64');

/** The payloads of a codec request body; a 400 names the field that is wrong. */
export function payloadsOf(text: string): Payload[] {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new HttpError(400, `body: not valid JSON (${(err as Error).message}); send {"payloads": [...]}`);
  }
  const list = (body as { payloads?: unknown } | null)?.payloads;
  if (!Array.isArray(list))
    throw new HttpError(400, 'payloads: must be an array of {metadata: {key: base64}, data: base64}');
  if (list.length > MAX_PAYLOADS)
    throw new HttpError(400, `payloads: at most ${MAX_PAYLOADS} a request; send them in several`);
  return list.map((p: unknown, i) => {
    if (p === null || typeof p !== 'object' || Array.isArray(p))
      throw new HttpError(400, `payloads[${i}]: must be an object {metadata, data}`);
    const { metadata, data } = p as { metadata?: unknown; data?: unknown };
    if (
      metadata !== undefined &&
      (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))
    )
      throw new HttpError(400, `payloads[${i}].metadata: must be an object of base64 strings`);
    return {
      metadata: Object.fromEntries(
        Object.entries((metadata ?? {}) as Record<string, unknown>).map(([k, v]) => [
          k,
          bytes(v, `payloads[${i}].metadata.${k}`),
        ]),
      ),
      data: data === undefined ? new Uint8Array() : bytes(data, `payloads[${i}].data`),
    };
  });
}

const json = (payloads: Payload[]) => ({
  payloads: payloads.map((p) => ({
    metadata: Object.fromEntries(Object.entries(p.metadata ?? {}).map(([k, v]) => [k, b64(v)])),
    data: b64(p.data),
  })),
});

export async function codecRoutes(app: FastifyInstance, o: CodecRouteOptions): Promise<void> {
  // Origin first (preflights carry no credentials): the page's own, a configured Web UI's, or none
  // (the CLI); anything else is refused, before the login and before the body is read.
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      let host: string | undefined;
      try {
        host = new URL(origin).host;
      } catch {
        // named below
      }
      const allowed = o.origins.includes(origin);
      if (!allowed && host !== req.headers.host)
        throw new HttpError(
          403,
          `origin ${JSON.stringify(origin.slice(0, 100))} may not call the codec server; add it to TIDEMARK_CODEC_ORIGINS`,
        );
      if (allowed)
        reply
          .header('access-control-allow-origin', origin)
          .header('access-control-allow-credentials', 'true')
          .header('vary', 'Origin');
    }
    if (req.method === 'OPTIONS') return;
    const roles = await o.authorized(req);
    if (!roles)
      throw new HttpError(
        401,
        'log in first: the page session cookie (the Web UI\'s "include cross-origin credentials"), or Authorization: Bearer <TIDEMARK_CODEC_TOKEN>',
      );
    // Encoding writes payloads a worker will believe (a signal's, a reset's): an admin's alone.
    // By the route matched, not the path as sent (/codec/%65ncode is the encode route too).
    const need = req.routeOptions.url === '/codec/encode' ? 'admin' : 'viewer';
    if (!hasRole(roles, need))
      throw new HttpError(
        403,
        `the codec's ${need === 'admin' ? 'encode' : 'decode'} needs the ${need} role`,
      );
    if (!o.codec)
      throw new HttpError(
        404,
        'payload encryption is not configured (TIDEMARK_PAYLOAD_KEYS is unset): payloads are plain JSON and need no codec server',
      );
    const ns = req.headers['x-namespace'];
    if (ns !== undefined && ns !== o.namespace)
      throw new HttpError(
        400,
        `header X-Namespace: ${JSON.stringify(String(ns).slice(0, 100))} is not this deployment's namespace (${o.namespace})`,
      );
  });

  for (const path of ['/codec/decode', '/codec/encode'])
    app.options(path, async (_req, reply) =>
      reply
        .code(204)
        .header('access-control-allow-methods', 'POST, OPTIONS')
        .header('access-control-allow-headers', 'content-type, x-namespace, authorization')
        .header('access-control-max-age', '600')
        .send(),
    );

  const route = (op: 'decode' | 'encode') =>
    app.post(`/codec/${op}`, { bodyLimit: CODEC_MAX_BODY }, async (req) => {
      const payloads = payloadsOf(typeof req.body === 'string' ? req.body : '');
      try {
        return json(await o.codec![op](payloads));
      } catch (err) {
        // A payload whose key id is not configured, or that was altered: named by key id, never a key.
        throw new HttpError(400, `payloads: ${(err as Error).message}`);
      }
    });
  route('decode');
  route('encode');
}
