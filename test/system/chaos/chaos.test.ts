// The fault suite's short run (`npm run chaos` at 20 faults): every fault kind at least once on
// three simulated hosts against the real servers, windows on both paths (local activities and
// activity tasks), in batches and in backup drills, checked by the independent checker.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runChaos } from '../../../chaos/driver.js';
import { FAULT_KINDS } from '../../../chaos/faults.js';

// Its own limit: about 2.5 minutes alone, several times that beside the rest of the suite on a busy machine.
test(
  '20 faults of every kind on three hosts: no duplicate, no loss, no unalerted unknown',
  { timeout: 1_200_000 },
  async () => {
    const lines: string[] = [];
    const r = await runChaos({
      faults: 20,
      seed: 20261130,
      lanes: 3,
      partitionSeconds: [10, 12],
      // Not `npm run chaos`'s names: both may run at once.
      net: { prefix: 'tmkc-', subnet: '10.216.0' },
      log: (line) => lines.push(line),
    });
    const summary = `${JSON.stringify({ ...r, resources: r.resources.length }, null, 2)}\n${lines.join('\n')}`;
    console.log(
      `chaos: ${r.faults_injected} faults in ${r.duration_s} s on ${r.hosts.mode} hosts, clock by ${r.clock_skew_mechanism}; violations: ${r.violations.length}`,
    );
    assert.ok(r.faults_injected >= 20, summary);
    assert.deepEqual(r.harness_errors, [], summary);
    const missing = FAULT_KINDS.filter((k) => r.kinds[k].injected === 0);
    assert.deepEqual(missing, [], `kinds never injected\n${summary}`);
    assert.deepEqual(
      {
        duplicate_effects: r.duplicate_effects,
        duplicate_windows: r.duplicate_windows,
        lost_windows: r.lost_windows,
        lost_effects: r.lost_effects,
        unalerted_unknowns: r.unalerted_unknowns,
        other: r.other_violations,
      },
      {
        duplicate_effects: 0,
        duplicate_windows: 0,
        lost_windows: 0,
        lost_effects: 0,
        unalerted_unknowns: 0,
        other: 0,
      },
      summary,
    );
    assert.ok(r.live_windows >= 1, `the live minutely job ran\n${summary}`);
    // Faults met windows on both paths (lane 1 runs them as local activities), and a batch.
    assert.ok(r.paths!.local.injected > 0 && r.paths!.task.injected > 0, `faults on both paths\n${summary}`);
    assert.ok(r.paths!.batch.injected > 0, `a batched backfill met a fault\n${summary}`);
    // And a backup window's restore drill (a drill round: the first of its kinds on each lane).
    assert.ok((r.paths!.drill?.injected ?? 0) > 0, `a backup drill met a fault\n${summary}`);
    // A round the harness could not finish was never checked: it must not pass as clean.
    assert.deepEqual(r.harness_errors, [], `rounds not verified\n${summary}`);
  },
);
