// A marketplace API simulator for the demo and the tests: it keeps prices and stock per SKU
// with a version, honours per-item idempotency keys, never takes an older version over a newer
// one, and can be told to fail, to time out after applying, to rate-limit, or to reject SKUs.
// POST /<marketplace>/v1/items:batchUpdate  {items: [{sku, price, stock, version, idempotencyKey}]}
// GET  /<marketplace>/v1/items              the current book, for people.
import { createServer } from 'node:http';

export type MarketAnswer = 'ok' | 'fail' | 'apply-then-timeout' | 'rate-limit';
interface Item {
  sku: string;
  price: string;
  stock: number;
  version: string;
  idempotencyKey: string;
}

export interface TestMarket {
  url: (name: string) => string;
  state: Map<string, Map<string, { price: string; stock: number; version: string }>>;
  /** How many times each item key was applied (must stay 1). */
  applied: Map<string, number>;
  requests: { market: string; answer: MarketAnswer; batchKey: string; skus: string[]; at: number }[];
  plan: Map<string, MarketAnswer[]>;
  /** "<market>:<sku>" -> the reason it is rejected with. */
  reject: Map<string, string>;
  close(): Promise<void>;
}

export async function startMarket(port = 0): Promise<TestMarket> {
  const state: TestMarket['state'] = new Map();
  const applied = new Map<string, number>();
  const results = new Map<string, unknown>();
  const requests: TestMarket['requests'] = [];
  const plan = new Map<string, MarketAnswer[]>();
  const reject = new Map<string, string>();
  const server = createServer((req, res) => {
    void (async () => {
      const book = /^\/([^/]+)\/v1\/items$/.exec(req.url ?? '');
      if (book && req.method === 'GET') {
        return void res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(Object.fromEntries(state.get(book[1]!) ?? new Map()), null, 2));
      }
      const match = /^\/([^/]+)\/v1\/items:batchUpdate$/.exec(req.url ?? '');
      if (!match || req.method !== 'POST') return void res.writeHead(404).end();
      const market = match[1]!;
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const items = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { items: Item[] }).items;
      const answer = plan.get(market)?.shift() ?? 'ok';
      requests.push({
        market,
        answer,
        batchKey: String(req.headers['idempotency-key']),
        skus: items.map((i) => i.sku),
        at: Date.now(),
      });
      if (answer === 'fail') return void res.writeHead(500).end('{"error":"internal"}');
      if (answer === 'rate-limit')
        return void res.writeHead(429, { 'retry-after': '1' }).end('{"error":"slow down"}');
      const held = state.get(market) ?? new Map();
      state.set(market, held);
      const out = items.map((i) => {
        const seen = results.get(`${market}|${i.idempotencyKey}`);
        if (seen) return seen;
        let r: { sku: string; status: string; reason?: string };
        const cur = held.get(i.sku);
        if (reject.has(`${market}:${i.sku}`))
          r = { sku: i.sku, status: 'rejected', reason: reject.get(`${market}:${i.sku}`)! };
        else if (cur && cur.version >= i.version) r = { sku: i.sku, status: 'stale' };
        else {
          held.set(i.sku, { price: i.price, stock: i.stock, version: i.version });
          applied.set(
            `${market}|${i.idempotencyKey}`,
            (applied.get(`${market}|${i.idempotencyKey}`) ?? 0) + 1,
          );
          r = { sku: i.sku, status: 'applied' };
        }
        results.set(`${market}|${i.idempotencyKey}`, r);
        return r;
      });
      const reply = () =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: out }));
      if (answer === 'apply-then-timeout') setTimeout(reply, 3_000);
      else reply();
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url: (name) => `${base}/${name}`,
    state,
    applied,
    requests,
    plan,
    reject,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
