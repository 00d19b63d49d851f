// A batched backfill's pages: several batches for every lane (a page ends with every lane waiting
// for its last batch, then a new run), and the planned page, one activity result, well under
// Temporal's 2 MiB limit for one whatever the job's name.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isoUtc, windowKey } from '../../contract/window-key.js';
import type { WindowSpec } from '../../contract/workflows.js';
import { BACKFILL_PAGE, BATCHES_PER_LANE, PAGE_BYTES, batchedPageSize } from '../../workflows/backfill.js';

const HOUR = 3_600_000;

/** The page as planBackfill returns it: `n` hourly windows of `job`. */
function pageOf(job: string, n: number): WindowSpec[] {
  const t0 = Date.parse('2026-12-31T23:00:00Z');
  return Array.from({ length: n }, (_, i) => ({
    job,
    start: isoUtc(new Date(t0 + i * HOUR)),
    end: isoUtc(new Date(t0 + (i + 1) * HOUR)),
    generation: 0,
    key: windowKey(job, new Date(t0 + i * HOUR)),
  }));
}

test('a page holds several batches for every lane', () => {
  assert.equal(batchedPageSize('bf-batched', 200, 8), 200 * 8 * BATCHES_PER_LANE);
  assert.ok(BATCHES_PER_LANE >= 2);
  assert.equal(batchedPageSize('sales', 1, 1), BACKFILL_PAGE, 'never fewer than an unbatched page');
});

test("the planned page stays within half of Temporal's limit for a payload, whatever the job's name", () => {
  for (const job of ['a', 'sales-hourly', `j${'x'.repeat(62)}`]) {
    const size = batchedPageSize(job, 1000, 64);
    const bytes = Buffer.byteLength(
      JSON.stringify({ windows: pageOf(job, size), alreadyDone: 0, next: null }),
    );
    assert.ok(bytes <= PAGE_BYTES, `${job}: ${size} windows are ${bytes} bytes`);
    assert.ok(bytes > PAGE_BYTES * 0.75, `${job}: ${size} windows are only ${bytes} bytes`);
  }
});
