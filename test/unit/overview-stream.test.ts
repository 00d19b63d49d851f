// The page's overview hub: one reading an interval however many viewers, the whole state once,
// then only the rows that changed; none while nobody watches; a failed reading ends the waits.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { overviewHub, type Update } from '../../web/overview-stream.js';

const rows = (n: number, lag: (i: number) => number = () => 0) =>
  Array.from({ length: n }, (_, i) => ({ job: `job-${i}`, lagWindows: lag(i) }));

/** A reading the test controls: each call takes the snapshot `state` holds now, counted. */
function source(jobs = rows(1_000)) {
  const s = { jobs, approvals: [] as unknown[], reads: 0, fail: false };
  const read = () => {
    s.reads++;
    return s.fail ? Promise.reject(new Error('postgres went away')) : Promise.resolve(structuredClone(s));
  };
  return { s, read: () => read().then(({ jobs, approvals }) => ({ jobs, approvals })) };
}

const parse = (u: Update | null) =>
  JSON.parse(u!.data) as { jobs: { job: string; lagWindows: number }[]; approvals?: unknown[] };

test('viewers share one reading: the first update is the whole state, then only the jobs that changed', async () => {
  const { s, read } = source();
  const hub = overviewHub(read, 20);
  const leave = [hub.join(), hub.join(), hub.join()];
  try {
    const firsts = await Promise.all([0, 1, 2].map(() => hub.next(0, 5_000)));
    assert.equal(s.reads, 1, 'three viewers, one reading');
    for (const u of firsts) {
      assert.equal(u!.event, 'message');
      assert.equal(parse(u).jobs.length, 1_000);
    }
    const v = firsts[0]!.version;
    s.jobs[7]!.lagWindows = 3;
    s.jobs[900]!.lagWindows = 1;
    const changes = await Promise.all([0, 1, 2].map(() => hub.next(v, 5_000)));
    for (const u of changes) {
      assert.equal(u!.event, 'changes');
      assert.deepEqual(parse(u), {
        jobs: [
          { job: 'job-7', lagWindows: 3 },
          { job: 'job-900', lagWindows: 1 },
        ],
      });
    }
    // Nothing changed since: a viewer waits, and is sent nothing.
    const quiet = await hub.next(changes[0]!.version, 100);
    assert.equal(quiet, null);
    // Another key changed: only it is sent.
    s.approvals = [{ request: 'r1' }];
    const approvals = await hub.next(changes[0]!.version, 5_000);
    assert.deepEqual(parse(approvals), { jobs: [], approvals: [{ request: 'r1' }] });
    // A viewer two versions behind (it missed one) gets the whole state, not a partial one.
    const behind = await hub.next(v, 5_000);
    assert.equal(behind!.event, 'message');
    assert.equal(parse(behind).jobs.length, 1_000);
  } finally {
    for (const l of leave) l();
  }
});

test('nobody watching, nothing is read; the next viewer waits for a fresh reading', async () => {
  const { s, read } = source(rows(3));
  const hub = overviewHub(read, 20);
  const leave = hub.join();
  const first = await hub.next(0, 5_000);
  leave();
  // The loop notices at its next turn that nobody is left.
  await new Promise((r) => setTimeout(r, 100));
  const reads = s.reads;
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(s.reads, reads, 'no reading while nobody watches');
  s.jobs[0]!.lagWindows = 5;
  const again = hub.join();
  try {
    const fresh = await hub.next(0, 5_000);
    assert.equal(fresh!.event, 'message');
    assert.deepEqual(
      parse(fresh).jobs.map((j) => j.lagWindows),
      [5, 0, 0],
      'the state read after the viewer came, not the one from before',
    );
    assert.ok(first);
  } finally {
    again();
  }
});

test('a failed reading ends the waiting viewers (their pages reconnect); the next reading recovers', async () => {
  const { s, read } = source(rows(2));
  const hub = overviewHub(read, 20);
  const leave = hub.join();
  try {
    const first = await hub.next(0, 5_000);
    s.fail = true;
    await assert.rejects(hub.next(first!.version, 5_000), /postgres went away/);
    s.fail = false;
    s.jobs[1]!.lagWindows = 2;
    const after = await hub.next(first!.version, 5_000);
    assert.equal(after!.event, 'changes');
    assert.deepEqual(parse(after).jobs, [{ job: 'job-1', lagWindows: 2 }]);
  } finally {
    leave();
  }
});

test('a job added or gone is sent whole: a viewer never merges rows of another catalog', async () => {
  const { s, read } = source(rows(2));
  const hub = overviewHub(read, 20);
  const leave = hub.join();
  try {
    const first = await hub.next(0, 5_000);
    s.jobs = rows(3);
    const after = await hub.next(first!.version, 5_000);
    assert.equal(after!.event, 'message');
    assert.equal(parse(after).jobs.length, 3);
  } finally {
    leave();
  }
});

test('a reading that never answers is given up after its time: viewers end and a new reading starts', async () => {
  let reads = 0;
  let hang = true;
  const read = () => {
    reads++;
    return hang ? new Promise<never>(() => undefined) : Promise.resolve({ jobs: rows(2) });
  };
  const hub = overviewHub(read, 20, 200);
  const leave = hub.join();
  try {
    await assert.rejects(hub.next(0, 5_000), /reading the overview took more than 200 ms/);
    hang = false;
    const after = await hub.next(0, 5_000);
    assert.equal(after!.event, 'message');
    assert.ok(reads >= 2, `${reads} readings`);
  } finally {
    leave();
  }
});
