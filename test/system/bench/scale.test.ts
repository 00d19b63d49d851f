// Flat costs at years of history (issue 14): the product's hot operations cost the same on three
// years of history as on a ledger of one day. Each operation calls the real function; the
// statements it sends are captured and run again under EXPLAIN (ANALYZE, BUFFERS): no sequential
// scan of a big table, no sort of many rows, and the shared buffers it touches (deterministic,
// unlike time) within a small margin of the one-day ledger's.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  HISTORY_FROM,
  RECENT_FROM,
  SCALE_NOW,
  scaleCatalog,
  seedHistory,
} from '../../../bench/scale-ledger.js';
import { operations, type Operation, type ScaleContext } from '../../../bench/scale-operations.js';
import { capture, explainAll, nodes, planProblems, type Explained } from '../../../bench/scale-plans.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { startTemporal } from '../../helpers/temporal.js';

/** Rows a sort may take: what one page of an operator view shows, not the history. */
const MAX_SORT_ROWS = 2_000;
/**
 * Buffers three years may add: the indexes of a big table are a level or two deeper, so each
 * index descent (a loop of an index scan node) may touch two more pages; the pages a range read
 * takes vary with where its rows fall (a quarter more).
 */
const margin = (small: number, plans: Explained[]) =>
  16 +
  Math.ceil(small / 4) +
  2 *
    plans
      .flatMap((e) => [...nodes(e.plan)])
      .filter((n) => /Index/.test(n['Node Type']))
      .reduce((s, n) => s + (n['Actual Loops'] ?? 1), 0);

let env: TestWorkflowEnvironment;
let small: TestDb;
let big: TestDb;
let seedSeconds = 0;
const catalog = scaleCatalog();
const now = new Date(SCALE_NOW.getTime() + 10 * 60_000);

before(async () => {
  [env, small, big] = await Promise.all([startTemporal(), createTestDb(), createTestDb()]);
  await seedHistory(small.db, RECENT_FROM, SCALE_NOW);
  const t = performance.now();
  await seedHistory(big.db, HISTORY_FROM, SCALE_NOW);
  seedSeconds = (performance.now() - t) / 1000;
});
after(async () => {
  await small?.drop();
  await big?.drop();
  await env?.teardown();
});

async function measure(t: TestDb, op: Operation): Promise<Explained[]> {
  const ctx: ScaleContext = { db: t.db, client: env.client, catalog, now };
  const statements = await capture(() => op.run(ctx));
  assert.ok(statements.length > 0, `${op.name}: no statement captured`);
  return await explainAll(t.url, statements, (await op.rewind?.(ctx)) ?? []);
}

test('three years of history seed in well under a minute', async () => {
  const n = await big.db
    .selectFrom('job_windows')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  assert.ok(Number(n.n) > 1_600_000, `${n.n} windows seeded`);
  console.log(`seeded ${n.n} windows with their runs, effects and incidents in ${seedSeconds.toFixed(1)} s`);
  assert.ok(seedSeconds > 0);
});

for (const op of operations) {
  test(`${op.name}: ${op.what}, ${op.readsHistory ? `still reads the history (${op.readsHistory})` : 'as cheap on three years as on one day'}`, async () => {
    const a = await measure(small, op);
    const b = await measure(big, op);
    const problems = b.flatMap((e) =>
      planProblems(e, MAX_SORT_ROWS).map((p) => `${p} in: ${e.text.slice(0, 200)}`),
    );
    if (op.readsHistory) {
      assert.ok(problems.length > 0, `${op.name} no longer reads the history: drop its readsHistory note`);
      return;
    }
    assert.deepEqual(problems, [], `${op.name} on three years`);
    const bufA = a.reduce((s, e) => s + e.buffers, 0);
    const bufB = b.reduce((s, e) => s + e.buffers, 0);
    const detail = b
      .map((e, i) => `${a[i]?.buffers ?? '-'} -> ${e.buffers}: ${e.text.slice(0, 160)}`)
      .join('\n');
    assert.ok(
      bufB <= bufA + margin(bufA, b),
      `${op.name}: ${bufA} buffers on one day, ${bufB} on three years\n${detail}`,
    );
  });
}
