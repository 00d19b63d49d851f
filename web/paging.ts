// Lists the page's API answers in pages: `?limit=` (1 to 1000, default 100) items, and while more
// follow, a `Link: <...>; rel="next"` header (RFC 8288) whose `after=` names the last item given.
// The answer stays the list itself, so a client that reads one page reads what it always read.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';

export const PAGE_DEFAULT = 100;
export const PAGE_MAX = 1000;

export interface PageAsk {
  readonly limit: number;
  readonly after?: string;
}

/** `?limit=` and `?after=` from a request; a bad limit is a 400 naming it. */
export function pageAsk(req: FastifyRequest): PageAsk {
  const q = (req.query ?? {}) as Record<string, unknown>;
  const raw = q.limit;
  let limit = PAGE_DEFAULT;
  if (raw !== undefined && raw !== '') {
    const n = typeof raw === 'string' && /^\d{1,4}$/.test(raw) ? Number(raw) : NaN;
    if (!(n >= 1 && n <= PAGE_MAX))
      throw new HttpError(400, `limit: a whole number from 1 to ${PAGE_MAX} (got ${JSON.stringify(raw)})`);
    limit = n;
  }
  const after = q.after;
  if (after !== undefined && typeof after !== 'string')
    throw new HttpError(400, 'after: give one value, the last item of the page before');
  return after ? { limit, after } : { limit };
}

/**
 * The page of `rows` (read with `limit + 1`, to know whether more follow) and its Link header: the
 * request's own path and query with `after` set to the last item's `cursor`.
 */
export function page<T>(
  req: FastifyRequest,
  reply: FastifyReply,
  ask: PageAsk,
  rows: readonly T[],
  cursor: (row: T) => string,
): T[] {
  const items = rows.slice(0, ask.limit);
  if (rows.length > ask.limit && items.length > 0) {
    const url = new URL(req.url, 'http://page');
    url.searchParams.set('limit', String(ask.limit));
    url.searchParams.set('after', cursor(items[items.length - 1]!));
    void reply.header('link', `<${url.pathname}${url.search}>; rel="next"`);
  }
  return items;
}
