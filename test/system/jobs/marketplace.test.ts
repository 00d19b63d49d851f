// The marketplace job kind end to end against a stateful marketplace API on loopback: two
// marketplaces, batches, a reply lost after applying, a rate limit, a rejected item set aside,
// run twice, and an older window that must not overwrite newer prices.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { memoryLogger } from '../../../activities/logger.js';
import { httpApiProvider } from '../../../activities/notify/http-api.js';
import { marketplacePush } from '../../../jobs/marketplace.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowRunResult } from '../../../contract/workflows.js';
import { startMarket, type TestMarket } from '../../../bin/marketplace-simulator.js';
import { realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

const stack = realStack();
let market: TestMarket;
before(async () => {
  market = await startMarket();
});
after(async () => {
  await market?.close();
});

const policy = {
  retry: { maximumAttempts: 5, initialInterval: '200ms', maximumInterval: '2s', backoffCoefficient: 2 },
  startToCloseTimeoutMs: 30_000,
  effectTimeoutMs: 10_000,
  settles: true,
};

test('prices and stock to two marketplaces: once per item, rejections set aside, older windows never win', async () => {
  const job = 'prices';
  // W1 (10:00-11:00): 12 products, two changes for sku-03 (the later one counts). W0 (09:00-10:00): older prices.
  const rows = Array.from({ length: 12 }, (_, i) => ({
    sku: `sku-${String(i + 1).padStart(2, '0')}`,
    price: 10 + i,
    stock: 100 - i,
    effective_at: `2026-07-01T10:${String(i * 4).padStart(2, '0')}:00Z`,
  }));
  rows.push({ sku: 'sku-03', price: 99, stock: 1, effective_at: '2026-07-01T10:59:00Z' });
  rows.push(
    { sku: 'sku-01', price: 1, stock: 1, effective_at: '2026-07-01T09:30:00Z' },
    { sku: 'sku-20', price: 20, stock: 20, effective_at: '2026-07-01T09:40:00Z' },
  );
  await stack.t.db.withSchema(DEMO_SCHEMA).insertInto('price_updates').values(rows).execute();
  market.reject.set('alpha:sku-07', 'unknown product');
  // alpha: batch 1 applied but its reply lost; batch 2 fails once with a 500 before it is applied.
  market.plan.set('alpha', ['apply-then-timeout', 'ok', 'fail']);
  market.plan.set('beta', ['rate-limit']);

  const catalog = defineCatalog([
    marketplacePush({
      name: job,
      grid: '1h',
      start: '2026-07-01T09:00:00Z',
      marketplaces: [
        { name: 'alpha', url: market.url('alpha'), batchSize: 5 },
        { name: 'beta', url: market.url('beta'), batchSize: 5 },
      ],
    }),
  ]);
  const deps = {
    db: stack.t.db,
    catalog,
    logger: memoryLogger(),
    now: () => new Date(),
    channels: { http: httpApiProvider({ timeoutMs: 1_000 }) },
  };
  const taskQueue = uniqueQueue(job);
  const run = (start: string, end: string) => {
    const key = `${job}/${start.replace('.000Z', 'Z')}`;
    return stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId: key,
      args: [{ job, start, end, generation: 0, key, trigger: 'manual', policy }],
    }) as Promise<WindowRunResult>;
  };
  await withWorker(stack.env, taskQueue, deps, async () => {
    const r = await run('2026-07-01T10:00:00Z', '2026-07-01T11:00:00Z');
    assert.deepEqual(
      r.effectOutcomes.map((o) => o.outcome),
      Array(6).fill('done'),
      '3 batches for each marketplace',
    );
    const requestsAfterFirst = market.requests.length;
    assert.equal((await run('2026-07-01T10:00:00Z', '2026-07-01T11:00:00Z')).outcome, 'already-done');
    assert.equal(market.requests.length, requestsAfterFirst, 'a second run sends nothing');

    // The older window arrives later (a backfill): only sku-20, which nothing newer touched, goes out.
    const older = await run('2026-07-01T09:00:00Z', '2026-07-01T10:00:00Z');
    assert.deepEqual(older.counts, { input: 2, applied: 2, quarantined: 0 });
    assert.deepEqual(
      market.requests.slice(requestsAfterFirst).map((q) => q.skus),
      [['sku-20'], ['sku-20']],
    );
  });

  // Every item applied exactly once, though alpha's first batch was sent twice and beta's was rate-limited.
  assert.ok([...market.applied.values()].every((n) => n === 1));
  const alphaFirst = market.requests.filter(
    (q) => q.market === 'alpha' && q.batchKey === `${job}/2026-07-01T10:00:00Z:push:alpha:1`,
  );
  assert.deepEqual(
    alphaFirst.map((q) => q.answer),
    ['apply-then-timeout', 'ok'],
  );
  const alphaSecond = market.requests.filter(
    (q) => q.market === 'alpha' && q.batchKey === `${job}/2026-07-01T10:00:00Z:push:alpha:2`,
  );
  assert.deepEqual(
    alphaSecond.map((q) => q.answer),
    ['fail', 'ok'],
  );
  const betaFirst = market.requests.filter(
    (q) => q.market === 'beta' && q.batchKey === `${job}/2026-07-01T10:00:00Z:push:beta:1`,
  );
  assert.deepEqual(
    betaFirst.map((q) => q.answer),
    ['rate-limit', 'ok'],
  );
  assert.ok(betaFirst[1]!.at - betaFirst[0]!.at >= 1_000, 'Retry-After honoured');

  // Marketplace state equals the master data's latest versions, sku-07 aside.
  const expected = new Map(
    rows
      .filter((r) => r.effective_at >= '2026-07-01T10:00:00Z')
      .sort((a, b) => a.effective_at.localeCompare(b.effective_at))
      .map((r) => [r.sku, `${r.price.toFixed(2)}/${r.stock}`]),
  );
  expected.set('sku-20', '20.00/20');
  const book = (m: string) =>
    new Map([...market.state.get(m)!.entries()].map(([sku, v]) => [sku, `${v.price}/${v.stock}`]));
  assert.deepEqual(book('beta'), expected);
  expected.delete('sku-07');
  assert.deepEqual(book('alpha'), expected);
  assert.equal(book('alpha').get('sku-03'), '99.00/1', 'the later change of the window wins');
  assert.equal(book('alpha').get('sku-01'), '10.00/100', 'the older window did not overwrite it');

  const aside = await stack.t.db
    .selectFrom('quarantine')
    .select(['record_key', 'reason'])
    .where('job', '=', job)
    .execute();
  assert.deepEqual(aside, [{ record_key: 'alpha:sku-07', reason: 'alpha rejected sku-07: unknown product' }]);
  const statuses = await stack.t.db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('marketplace_items')
    .select(['marketplace', 'status'])
    .where('window_key', 'like', `${job}/%`)
    .execute();
  assert.deepEqual(
    statuses.filter((s) => s.status !== 'applied'),
    [{ marketplace: 'alpha', status: 'rejected' }],
  );
});
