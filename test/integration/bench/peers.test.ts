// The peers measured side by side (bench/peers.ts) at small sizes: graphile-worker and pg-boss run
// the hourly sales summary as one job per window, their totals checked against the orders; the
// kill test SIGKILLs each system's worker in the middle and counts windows applied twice or lost.
// tidemark must show neither; the peers with the careful handler (a done marker in the window's
// transaction) apply none twice; with the naive one their figures are what they are.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { checkTotals, killTest, loadPeerOrders, peerThroughput, PEERS } from '../../../bench/peers.js';
import { applyWindow, HANDLERS, peerPool } from '../../../bench/peers/summary.js';
import { createTestDb } from '../../helpers/db.js';
// Installs the quiet SDK runtime before anything starts a Temporal connection.
import '../../helpers/temporal.js';
import { demo } from '../../../jobs/demo-schema.js';

const FIRST = new Date('2025-01-01T00:00:00Z');
const HOUR = 3_600_000;

test('the totals check fails a run that applied nothing, and one that applied a window twice', async () => {
  const t = await createTestDb();
  const pool = peerPool(t.url);
  try {
    const layout = { first: FIRST, windows: 6, perWindow: 3, strideHours: 1 };
    await loadPeerOrders(t.db, layout);
    await assert.rejects(checkTotals(t.db, 'nothing', layout), /totals of nothing differ/);
    const window = (i: number) => [
      new Date(FIRST.getTime() + i * HOUR),
      new Date(FIRST.getTime() + (i + 1) * HOUR),
    ];
    for (let i = 0; i < 6; i++) await applyWindow(pool, 'once', window(i)[0]!, window(i)[1]!);
    await checkTotals(t.db, 'once', layout);
    for (let i = 0; i < 6; i++) await applyWindow(pool, 'twice', window(i)[0]!, window(i)[1]!, 0, 'naive');
    await applyWindow(pool, 'twice', window(2)[0]!, window(2)[1]!, 0, 'naive');
    await assert.rejects(checkTotals(t.db, 'twice', layout), /totals of twice differ/);
    // The careful handler: a window delivered again, even at the same time, is applied once.
    await Promise.all(
      [0, 1, 2, 2, 3, 4, 5, 5].map((i) => applyWindow(pool, 'careful', window(i)[0]!, window(i)[1]!)),
    );
    await applyWindow(pool, 'careful', window(2)[0]!, window(2)[1]!);
    await checkTotals(t.db, 'careful', layout);
    const rows = await sql<{
      n: number;
    }>`select count(*)::int n from ${demo.daily_sales} where job = 'once'`.execute(t.db);
    assert.equal(rows.rows[0]!.n, 1, 'six hourly windows of one day: one daily row');
  } finally {
    await pool.end();
    await t.drop();
  }
});

for (const handler of HANDLERS) {
  test(`throughput: graphile-worker and pg-boss each run 48 hourly windows with the ${handler} handler, totals exact`, async (t) => {
    const result = await peerThroughput({ windows: 48, handler });
    t.diagnostic(JSON.stringify(result));
    for (const peer of PEERS) {
      assert.equal(result[peer].windows, 48);
      assert.equal(result[peer].handler, handler);
      assert.ok(result[peer].windowsPerSecond > 0, `${peer}: ${JSON.stringify(result[peer])}`);
    }
  });
}

// One system at a time: the kills are timed by each run's progress, which a busy test process
// (bundling tidemark's workflows) would observe late.
describe('kill test: SIGKILLs spread over 40 windows, restart, count', () => {
  const opts = { windows: 40, kills: 2, holdMs: 200, boundMs: 25_000 };
  test('tidemark: no window applied twice, none lost', async (t) => {
    const r = await killTest('tidemark', opts);
    t.diagnostic(JSON.stringify(r));
    assert.ok(r.kills >= 1, JSON.stringify(r));
    assert.equal(r.double_applied, 0, JSON.stringify(r));
    assert.equal(r.lost, 0, JSON.stringify(r));
    assert.equal(r.unfinished, 0, JSON.stringify(r));
  });
  for (const peer of PEERS) {
    test(`${peer}, naive handler: killed, every window counted as applied once, twice or lost`, async (t) => {
      const r = await killTest(peer, { ...opts, handler: 'naive' });
      t.diagnostic(JSON.stringify(r));
      assert.ok(r.kills >= 1, JSON.stringify(r));
      assert.equal(r.once + r.double_applied + r.lost, 40, JSON.stringify(r));
      // The peer ran: it applied windows. A busy machine may see every window of a peer applied
      // twice (pg-boss retries a killed worker's whole batch), so none applied once is no failure.
      assert.ok(r.once + r.double_applied > 0, JSON.stringify(r));
      assert.equal(
        Object.values(r.lost_states).reduce((a, b) => a + b, 0),
        r.lost,
        'each lost window explained',
      );
    });
    test(`${peer}, careful handler: killed, no window applied twice; each lost one's job state told`, async (t) => {
      const r = await killTest(peer, { ...opts, handler: 'careful' });
      t.diagnostic(JSON.stringify(r));
      assert.ok(r.kills >= 1, JSON.stringify(r));
      assert.equal(r.double_applied, 0, JSON.stringify(r));
      assert.equal(r.once + r.lost, 40, JSON.stringify(r));
      assert.equal(
        Object.values(r.lost_states).reduce((a, b) => a + b, 0),
        r.lost,
        'each lost window explained',
      );
    });
  }
});
