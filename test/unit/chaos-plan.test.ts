// The fault suite's plan: a seed gives the same plan, a short run still has every kind, and the
// figures' percentiles and headline verdict read as RELIABILITY.md says.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FAULT_KINDS, planKinds, rng } from '../../chaos/faults.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  clean,
  emptyFigures,
  percentile,
  renderReliability,
  writeReports,
  type ChaosResults,
} from '../../chaos/report.js';

test('a seed reproduces the plan; another seed gives another', () => {
  assert.deepEqual(planKinds(500, rng(42)), planKinds(500, rng(42)));
  assert.notDeepEqual(planKinds(500, rng(42)), planKinds(500, rng(43)));
});

test('every kind comes first, once each, so a 20-fault run has all of them', () => {
  const plan = planKinds(20, rng(7));
  assert.deepEqual([...plan.slice(0, FAULT_KINDS.length)].sort(), [...FAULT_KINDS].sort());
  const counts = new Map<string, number>();
  for (const k of planKinds(500, rng(7))) counts.set(k, (counts.get(k) ?? 0) + 1);
  assert.equal(counts.size, FAULT_KINDS.length);
  // Partitions last 10-60 s each: the rarest kind; duplicates and terminations the commonest.
  assert.ok(counts.get('partition')! < counts.get('duplicates')!);
  // Shares are rounded per kind; the driver goes round the plan again when a run needs more.
  assert.ok(Math.abs([...counts.values()].reduce((s, n) => s + n, 0) - 500) <= FAULT_KINDS.length);
});

test('percentiles: nearest rank; none without values', () => {
  assert.equal(percentile([], 50), null);
  assert.equal(percentile([5], 99), 5);
  assert.equal(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50), 5);
  assert.equal(percentile([10, 9, 8, 7, 6, 5, 4, 3, 2, 1], 99), 10);
});

test('the verdict is clean only with no duplicate, loss, unalerted unknown, other violation or harness error', async () => {
  const kind = { ...emptyFigures(), recovery_p50_ms: null, recovery_p99_ms: null };
  const base: ChaosResults = {
    seed: 1,
    started_at: '2026-11-30T00:00:00.000Z',
    duration_s: 60,
    hosts: { mode: 'netns', note: 'three namespaces', count: 3 },
    clock_skew_mechanism: 'libfaketime',
    lanes: 1,
    rounds: 1,
    windows_checked: 2,
    live_windows: 1,
    live_windows_waited_for_skew: 0,
    worker_lives: 3,
    faults_injected: 1,
    duplicate_effects: 0,
    duplicate_windows: 0,
    lost_windows: 0,
    lost_effects: 0,
    unalerted_unknowns: 0,
    duplicate_alerts: 0,
    other_violations: 0,
    stalled_rounds: 0,
    harness_errors: [],
    final_violations: [],
    violations: [],
    kinds: Object.fromEntries(FAULT_KINDS.map((k) => [k, kind])) as unknown as ChaosResults['kinds'],
    resources: [],
  };
  assert.equal(clean(base), true);
  for (const bad of [
    { duplicate_effects: 1 },
    { duplicate_windows: 1 },
    { lost_windows: 1 },
    { lost_effects: 1 },
    { unalerted_unknowns: 1 },
    { other_violations: 1 },
    { harness_errors: ['x'] },
  ])
    assert.equal(clean({ ...base, ...bad }), false, JSON.stringify(bad));
  const md = renderReliability(
    { ...base, violations: ['crash:inHandler: window x applied twice'] },
    'CHAOS_SEED=1 CHAOS_FAULTS=1 CHAOS_LANES=1 npm run chaos',
  );
  assert.match(md, /\*\*1 faults injected\*\*/);
  assert.match(md, /- crash:inHandler: window x applied twice/);
  assert.match(md, /CHAOS_SEED=1 CHAOS_FAULTS=1 CHAOS_LANES=1 npm run chaos {3}# this run's plan again/);

  // A soak run writes its own file; RELIABILITY.md shows the fault run and the soak's growth.
  const root = await mkdtemp(join(tmpdir(), 'tidemark-report-'));
  try {
    await writeReports({ ...base, command: 'npm run chaos' }, root);
    const t0 = Date.parse(base.started_at);
    const resources = Array.from({ length: 100 }, (_, i) => ({
      at: t0 + i * 10_000,
      host: 'h1',
      pid: 7,
      rssKb: 100_000 + (i >= 80 ? 50_000 : 0),
      fds: 40,
    }));
    await writeReports(
      { ...base, soak_ms: 1_000_000, command: 'npm run chaos -- --soak 17m', resources },
      root,
    );
    const text = await readFile(join(root, 'RELIABILITY.md'), 'utf8');
    assert.match(text, /\*\*1 faults injected\*\*/);
    assert.match(text, /## Soak/);
    assert.match(text, /\| resident memory \(MiB\) \| 97\.7 \| 146\.5 \| 1\.50 \|/);
    assert.match(text, /\| open descriptors \| 40 \| 40 \| 1\.00 \|/);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
