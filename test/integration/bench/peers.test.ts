// The peers measured side by side (bench/peers.ts) at small sizes: graphile-worker and pg-boss run
// the hourly sales summary as one job per window, their totals checked against the orders; the
// kill test SIGKILLs each system's worker in the middle and counts windows applied twice or lost.
// tidemark must show neither; the peers' figures are what they are (they are at-least-once).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { checkTotals, killTest, loadPeerOrders, peerThroughput, PEERS } from '../../../bench/peers.js';
import { applyWindow, peerPool } from '../../../bench/peers/summary.js';
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
    for (let i = 0; i < 6; i++) await applyWindow(pool, 'twice', window(i)[0]!, window(i)[1]!);
    await applyWindow(pool, 'twice', window(2)[0]!, window(2)[1]!);
    await assert.rejects(checkTotals(t.db, 'twice', layout), /totals of twice differ/);
    const rows = await sql<{
      n: number;
    }>`select count(*)::int n from ${demo.daily_sales} where job = 'once'`.execute(t.db);
    assert.equal(rows.rows[0]!.n, 1, 'six hourly windows of one day: one daily row');
  } finally {
    await pool.end();
    await t.drop();
  }
});

test('throughput: graphile-worker and pg-boss each run 48 hourly windows, totals exact', async (t) => {
  const result = await peerThroughput({ windows: 48 });
  t.diagnostic(JSON.stringify(result));
  for (const peer of PEERS) {
    assert.equal(result[peer].windows, 48);
    assert.ok(result[peer].windowsPerSecond > 0, `${peer}: ${JSON.stringify(result[peer])}`);
  }
});

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
    test(`${peer}: killed, every window counted as applied once, twice or lost`, async (t) => {
      const r = await killTest(peer, opts);
      t.diagnostic(JSON.stringify(r));
      assert.ok(r.kills >= 1, JSON.stringify(r));
      assert.equal(r.once + r.double_applied + r.lost, 40, JSON.stringify(r));
      // The peer ran: it applied windows. A busy machine may see every window of a peer applied
      // twice (pg-boss retries a killed worker's whole batch), so none applied once is no failure.
      assert.ok(r.once + r.double_applied > 0, JSON.stringify(r));
    });
  }
});
