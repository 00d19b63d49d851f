// bench/results.json across runs: `npm run bench` replaces the figures it measures and keeps those
// of the sections run on their own (bench/jobs.ts, ledger-size.ts, restore.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { withSeparateSections, type Figure } from '../../bench/figures.js';

const f = (name: string, value: number): Figure => ({ name, value, unit: 'ms', baseline: null, ratio: null });

test("a full run keeps the separate sections' figures and replaces its own", () => {
  const saved = [
    f('ledger.fixed_ms', 1),
    f('jobs.sync_ms@10', 97),
    f('size.bytes', 5),
    f('restore.checked_s', 9),
    f('peers.gone', 3),
  ];
  const run = [f('ledger.fixed_ms', 2), f('worker.rss_mb', 250)];
  assert.deepEqual(
    withSeparateSections(run, saved).map((x) => [x.name, x.value]),
    [
      ['ledger.fixed_ms', 2],
      ['worker.rss_mb', 250],
      ['jobs.sync_ms@10', 97],
      ['size.bytes', 5],
      ['restore.checked_s', 9],
    ],
  );
});
