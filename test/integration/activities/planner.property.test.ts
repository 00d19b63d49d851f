// Property-based test of the planner and the ledger (fast-check): random sequences of ticks
// (some delivered late), backfills, duplicate starts, reruns, order corrections and fixes, over
// a handler that fails for chosen windows (some permanently until fixed, some transiently).
// The activities are driven directly with an explicit clock, as the workflows would call them,
// on a scratch database. The checker keeps its own model, computed from the inputs only (which
// windows were tried, which handler calls succeeded, which amounts they read), never from the
// ledger's queries: no gap, no overlap, no second effect per (window, generation), the
// watermark at the end of the contiguous done prefix, at most maxCatchUp new windows per tick.
// A failure prints fast-check's seed and path; rerun with them to reproduce it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { createActivities, type Activities } from '../../../activities/index.js';
import { memoryLogger } from '../../../activities/logger.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { Trigger } from '../../../contract/workflows.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => {
  await t.drop();
});

const MIN = 60_000;
const BASE = Date.UTC(2026, 4, 1);
/** Orders exist for windows -FIRST..LAST of a run (one each), so every reachable window has one. */
const FIRST = -6;
const LAST = 140;

type Op =
  | { kind: 'tick'; advance: number; lag: number }
  | { kind: 'wait'; advance: number }
  | { kind: 'backfill'; from: number; length: number; page: number }
  | { kind: 'duplicate'; pick: number }
  | { kind: 'rerun'; pick: number }
  | { kind: 'correct'; pick: number; amount: number }
  | { kind: 'fix'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      advance: fc.integer({ min: 0, max: 24 }),
      lag: fc.integer({ min: 0, max: 8 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('wait' as const), advance: fc.integer({ min: 1, max: 24 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('backfill' as const),
      from: fc.oneof(fc.integer({ min: FIRST, max: 2 }), fc.integer({ min: FIRST, max: 40 })),
      length: fc.integer({ min: 1, max: 12 }),
      page: fc.integer({ min: 1, max: 5 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rerun' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('correct' as const),
      pick: fc.nat(),
      amount: fc.integer({ min: 1, max: 900 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fix' as const), pick: fc.nat() }) },
);

const scenarioArb = fc.record({
  gridMin: fc.constantFrom(15, 60, 90),
  latenessMin: fc.integer({ min: 0, max: 14 }),
  maxCatchUp: fc.integer({ min: 1, max: 4 }),
  attempts: fc.integer({ min: 1, max: 3 }),
  parallel: fc.boolean(),
  /** Window index -> how it fails: permanently (until a fix), or for its next `n` handler calls. */
  failures: fc.array(
    fc.record({
      window: fc.integer({ min: FIRST, max: 30 }),
      permanent: fc.boolean(),
      n: fc.integer({ min: 1, max: 4 }),
    }),
    { maxLength: 6 },
  ),
  /** Before the first tick: time passes and an operator backfills (the schedule starts late). */
  prelude: fc.option(
    fc.record({
      advance: fc.integer({ min: 1, max: 24 }),
      from: fc.integer({ min: FIRST, max: 0 }),
      length: fc.integer({ min: 1, max: 12 }),
    }),
    { nil: undefined },
  ),
  ops: fc.array(opArb, { minLength: 1, maxLength: 15 }),
});
type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

let runNo = 0;

async function runScenario(s: Scenario): Promise<void> {
  const job = `prop-${++runNo}`;
  const ms = s.gridMin * MIN;
  const lateness = s.latenessMin * MIN;
  const start = Math.ceil(BASE / ms) * ms;
  const startOf = (i: number) => start + i * ms;
  const indexOf = (iso: string | Date) => (new Date(iso).getTime() - start) / ms;
  const keyOf = (i: number, gen = 0) =>
    `${job}/${new Date(startOf(i)).toISOString().replace('.000Z', 'Z')}${gen > 0 ? `#${gen}` : ''}`;

  // ---- The model: only the inputs and what the handler (the injector) saw. ----
  const amounts = new Map<number, number>();
  for (let i = FIRST; i <= LAST; i++) amounts.set(i, 1 + ((i * 37 + 1000) % 200));
  const plan = new Map<number, { permanent: boolean; left: number }>();
  for (const f of s.failures) plan.set(f.window, { permanent: f.permanent, left: f.n });
  const calls = new Map<number, number>(); // generation-0 handler calls per window
  const successes = new Map<string, number>(); // `${index}#${generation}` -> successful handler calls
  const contributed = new Map<number, number>(); // window -> amount its latest successful generation read
  const generations = new Map<number, number>(); // window -> newest rerun generation reserved
  const unexpected: string[] = [];
  let clock = start;
  let lastTick = -Infinity;
  const done = (i: number) => (successes.get(`${i}#0`) ?? 0) > 0;
  const failed = (i: number) => (calls.get(i) ?? 0) > 0 && !done(i);
  /** Windows before this index are closed at `now` (negative indexes are before the job's start). */
  const closedBefore = (now: number) => Math.floor((now - lateness - start) / ms);
  const closedCount = (now: number) => Math.max(0, closedBefore(now));

  const catalog = defineCatalog([
    salesJob(job, {
      grid: s.gridMin === 60 ? '1h' : `${s.gridMin}m`,
      lateness: `${s.latenessMin}m`,
      maxCatchUp: s.maxCatchUp,
      start: new Date(start).toISOString(),
      retry: { maximumAttempts: s.attempts },
      handler: async (ctx) => {
        const i = indexOf(ctx.window.start);
        if (ctx.generation === 0) {
          calls.set(i, (calls.get(i) ?? 0) + 1);
          const p = plan.get(i);
          if (p?.permanent) throw new Error(`injected: window ${i} is broken`);
          if (p && p.left > 0) {
            p.left--;
            throw new Error(`injected: window ${i} failed for now`);
          }
        }
        const amount = amounts.get(i)!;
        const counts = await summariseWindow(ctx);
        const k = `${i}#${ctx.generation}`;
        successes.set(k, (successes.get(k) ?? 0) + 1);
        contributed.set(i, amount);
        return counts;
      },
    }),
  ]);
  const acts: Activities = createActivities({
    db: t.db,
    catalog,
    logger: memoryLogger(),
    now: () => new Date(clock),
  });

  await t.db.withSchema(DEMO_SCHEMA).deleteFrom('orders').execute();
  await t.db
    .withSchema(DEMO_SCHEMA)
    .insertInto('orders')
    .values(
      [...amounts].map(([i, amount]) => ({
        order_key: `${job}-${i}`,
        placed_at: new Date(startOf(i) + MIN).toISOString(),
        amount,
      })),
    )
    .execute();

  const policy = {
    retry: {
      maximumAttempts: s.attempts,
      initialInterval: '1s',
      maximumInterval: '1s',
      backoffCoefficient: 1,
    },
    startToCloseTimeoutMs: 30_000,
  };
  /**
   * One window run as the window workflow makes it: its attempts, then an incident if all failed.
   * With `copies` > 1 every attempt races that many copies of itself (a tick, a backfill and a
   * manual start of one window, which the engine folds into one run by its workflow id, or a
   * retry whose first attempt is still alive): the attempt fails only if every copy failed.
   */
  async function runWindow(i: number, gen: number, trigger: Trigger, copies = 1): Promise<void> {
    const input = {
      job,
      start: new Date(startOf(i)).toISOString(),
      end: new Date(startOf(i + 1)).toISOString(),
      generation: gen,
      key: keyOf(i, gen),
      trigger,
      policy,
    };
    for (let attempt = 1; ; attempt++) {
      const results = await Promise.allSettled(
        Array.from({ length: copies }, () => acts.processWindow(input)),
      );
      if (results.some((r) => r.status === 'fulfilled')) return;
      const messages = results.map((r) =>
        r.status === 'rejected' ? String(r.reason?.message ?? r.reason) : '',
      );
      for (const m of messages) if (!m.startsWith('injected:')) unexpected.push(`${input.key}: ${m}`);
      if (attempt >= s.attempts) {
        await acts.raiseIncident({ job, subject: input.key, kind: 'window-failed', error: messages[0]! });
        return;
      }
    }
  }
  const runAll = async (items: number[], trigger: Trigger) => {
    if (s.parallel) await Promise.all(items.map((i) => runWindow(i, 0, trigger)));
    else for (const i of items) await runWindow(i, 0, trigger);
  };

  /** A tick at `now`; returns how many new (never tried) windows it planned. */
  async function tick(now: number): Promise<number> {
    lastTick = Math.max(lastTick, now);
    const closed = closedCount(now);
    const untouched = [...Array(closed).keys()].filter((i) => (calls.get(i) ?? 0) === 0 && !done(i));
    // The tick walks the closed windows oldest first and stops at its maxCatchUp-th new one:
    // failed windows after that wait for a later tick (they are behind new windows, not lost).
    const reach = untouched.length >= s.maxCatchUp ? untouched[s.maxCatchUp - 1]! : closed;
    const failing = [...Array(closed).keys()].filter((i) => i < reach && failed(i));
    const p = await acts.planTick({ job, now: new Date(now).toISOString() });
    const idx = p.windows.map((w) => indexOf(w.start));
    const where = `tick at ${new Date(now).toISOString()} planned [${idx.join(', ')}]`;
    assert.equal(new Set(idx).size, idx.length, `a window planned twice: ${where}`);
    for (const w of p.windows) {
      const i = indexOf(w.start);
      assert.ok(Number.isInteger(i) && i >= 0 && i < closed, `not a closed window of the job: ${where}`);
      assert.equal(
        w.end,
        new Date(startOf(i + 1)).toISOString().replace('.000Z', 'Z'),
        `window end: ${where}`,
      );
      assert.equal(w.key, keyOf(i), `key: ${where}`);
      assert.ok(!done(i), `done window ${i} planned again: ${where}`);
    }
    const fresh = idx.filter((i) => !failed(i));
    assert.ok(
      fresh.length <= s.maxCatchUp,
      `${fresh.length} new windows > maxCatchUp ${s.maxCatchUp}: ${where}`,
    );
    assert.deepEqual(
      fresh,
      untouched.slice(0, s.maxCatchUp),
      `the oldest new windows, none skipped: ${where}`,
    );
    const retries = idx.filter(failed);
    assert.equal(retries.length, Math.min(s.maxCatchUp, failing.length), `failed windows retried: ${where}`);
    await runAll(idx, 'schedule');
    return fresh.length;
  }

  async function check(when: string): Promise<void> {
    assert.deepEqual(unexpected, [], `${when}: errors other than the injected ones`);
    const rows = await t.db.selectFrom('job_windows').selectAll().where('job', '=', job).execute();
    const status = new Map<string, string>();
    for (const r of rows) {
      const i = indexOf(r.window_start);
      // No overlap: every row is a window of the grid, [start, start + grid).
      assert.ok(Number.isInteger(i), `${when}: row off the grid at ${r.window_start.toISOString()}`);
      assert.equal(r.window_end.getTime(), startOf(i + 1), `${when}: row ${i} overlaps its neighbours`);
      status.set(`${i}#${r.generation}`, r.status);
    }
    const touched = new Set([...calls.keys(), ...[...successes.keys()].map((k) => Number(k.split('#')[0]))]);
    for (const i of touched) {
      const want = done(i) ? 'done' : 'failed';
      assert.equal(
        status.get(`${i}#0`),
        want,
        `${when}: window ${i} is ${status.get(`${i}#0`)}, expected ${want}`,
      );
    }
    for (const [k, v] of status) {
      const [i, gen] = k.split('#').map(Number) as [number, number];
      if (gen === 0 && !touched.has(i))
        assert.fail(`${when}: window ${i} has a row (${v}) but was never run`);
      if (gen > 0) assert.equal(v, 'done', `${when}: rerun ${k} is ${v}`);
    }
    // One effect per (window, generation): the handler succeeded at most once, and the
    // contribution rows and the processed-run records agree with it.
    for (const [k, n] of successes) assert.equal(n, 1, `${when}: ${n} successful handler calls for ${k}`);
    const contributions = await t.db
      .withSchema(DEMO_SCHEMA)
      .selectFrom('sales_window_totals')
      .select(['window_start', 'generation'])
      .where('job', '=', job)
      .execute();
    const contributionKeys = contributions.map((c) => `${indexOf(c.window_start)}#${c.generation}`).sort();
    assert.deepEqual(contributionKeys, [...successes.keys()].sort(), `${when}: contributions`);
    const processed = await t.db
      .selectFrom('job_runs')
      .select(['window_start', 'generation'])
      .where('job', '=', job)
      .where('kind', '=', 'window')
      .where('outcome', '=', 'processed')
      .execute();
    const processedKeys = processed.map((r) => `${indexOf(r.window_start!)}#${r.generation}`).sort();
    assert.deepEqual(processedKeys, [...successes.keys()].sort(), `${when}: processed runs`);
    // Totals: each done window counts once, with the amount its latest generation read.
    const sales = await t.db
      .withSchema(DEMO_SCHEMA)
      .selectFrom('daily_sales')
      .select(['total'])
      .where('job', '=', job)
      .execute();
    const total = sales.reduce((sum, r) => sum + Math.round(Number(r.total) * 100), 0);
    const expected = [...contributed.values()].reduce((sum, a) => sum + a * 100, 0);
    assert.equal(total, expected, `${when}: totals`);
    // The watermark: the end of the contiguous done prefix from the job's start.
    let prefix = 0;
    while (done(prefix)) prefix++;
    const wm = await t.db
      .selectFrom('job_watermarks')
      .select('watermark')
      .where('job', '=', job)
      .executeTakeFirst();
    if (wm) {
      assert.equal(
        wm.watermark.toISOString(),
        new Date(startOf(prefix)).toISOString(),
        `${when}: watermark, the done prefix being windows 0..${prefix - 1}`,
      );
    }
    // Every failed window has an open incident; no other window does.
    const open = await t.db
      .selectFrom('incidents')
      .select('subject')
      .where('job', '=', job)
      .where('kind', '=', 'window-failed')
      .where('closed_at', 'is', null)
      .execute();
    const wantOpen = [...touched].filter(failed).map((i) => keyOf(i));
    assert.deepEqual(open.map((o) => o.subject).sort(), wantOpen.sort(), `${when}: open incidents`);
  }

  const prelude: Op[] = s.prelude
    ? [
        { kind: 'wait', advance: s.prelude.advance },
        { kind: 'backfill', from: s.prelude.from, length: s.prelude.length, page: 5 },
      ]
    : [];
  let n = 0;
  for (const op of [...prelude, ...s.ops]) {
    n++;
    const when = `op ${n} ${JSON.stringify(op)}`;
    if (op.kind === 'tick') {
      clock += (op.advance * ms) / 4;
      await tick(Math.max(start, clock - (op.lag * ms) / 4));
    } else if (op.kind === 'wait') {
      // Time passes without a tick (the schedule was paused, or its ticks were lost).
      clock += (op.advance * ms) / 4;
    } else if (op.kind === 'backfill') {
      let from = startOf(op.from);
      const to = startOf(op.from + op.length);
      while (from < to) {
        const page = await acts.planBackfill({
          job,
          from: new Date(from).toISOString(),
          to: new Date(to).toISOString(),
          limit: op.page,
        });
        const idx = page.windows.map((w) => indexOf(w.start));
        for (const i of idx) {
          assert.ok(i >= op.from && i < op.from + op.length, `${when}: window ${i} outside the range`);
          assert.ok(startOf(i + 1) + lateness <= clock, `${when}: open window ${i} in a backfill`);
          assert.ok(!done(i), `${when}: done window ${i} in a backfill page`);
        }
        assert.ok(idx.length <= op.page, `${when}: page of ${idx.length} > ${op.page}`);
        await runAll(idx, 'backfill');
        if (!page.next) break;
        from = new Date(page.next).getTime();
      }
    } else if (op.kind === 'duplicate') {
      // The same window from several hands at once: every attempt races two or three copies.
      const closed = Math.min(closedBefore(clock), LAST) - FIRST;
      if (closed > 0) {
        const i = FIRST + (op.pick % closed);
        await runWindow(i, 0, 'manual', 2 + (op.pick % 2));
      }
    } else if (op.kind === 'rerun') {
      const candidates = [...successes.keys()]
        .filter((k) => k.endsWith('#0'))
        .map((k) => Number(k.split('#')[0]));
      if (candidates.length > 0) {
        const i = candidates.sort((a, b) => a - b)[op.pick % candidates.length]!;
        const request = `${job}/rerun-${n}`;
        const r = await acts.requestRerun({
          job,
          windowStart: new Date(startOf(i)).toISOString(),
          reason: 'property test',
          requestedBy: 'prop',
          workflowId: request,
        });
        const gen = (generations.get(i) ?? 0) + 1;
        generations.set(i, gen);
        assert.equal(r.window.generation, gen, `${when}: generation reserved`);
        await runWindow(i, gen, 'rerun');
        await acts.settleRerun({ request, status: 'done' });
      }
    } else if (op.kind === 'correct') {
      // A late correction of a window's order: only a later (re)run reads it.
      const i = FIRST + (op.pick % (LAST - FIRST));
      amounts.set(i, op.amount);
      await t.db
        .withSchema(DEMO_SCHEMA)
        .updateTable('orders')
        .set({ amount: op.amount })
        .where('order_key', '=', `${job}-${i}`)
        .execute();
    } else {
      const broken = [...plan].filter(([, p]) => p.permanent).map(([i]) => i);
      if (broken.length > 0) plan.get(broken[op.pick % broken.length]!)!.permanent = false;
    }
    await check(when);
  }

  // Drain: ticks at the last tick's time until nothing new is planned; then no closed window is
  // left behind: each is done, or failed with an open incident.
  if (lastTick > -Infinity) {
    for (let k = 0; k < LAST; k++) {
      const fresh = await tick(lastTick);
      await check(`drain tick ${k + 1}`);
      if (fresh === 0) break;
    }
    for (let i = 0; i < closedCount(lastTick); i++) {
      assert.ok(done(i) || failed(i), `gap: window ${i} closed by the last tick but never processed`);
    }
  }
}

/** Scenarios that found defects, run first on every run (regression tests). */
const EXAMPLES: [Scenario][] = [
  // Windows backfilled before the job's first tick: the tick left the watermark at the job's
  // start, behind the done window 0 (before the fix in db/ledger.ts watermarkOf, found as seed 2139126010,
  // path "3:0:0:0:0:2:0:0:1:1:1:1:1" of this file without these examples).
  [
    {
      gridMin: 15,
      latenessMin: 0,
      maxCatchUp: 1,
      attempts: 1,
      parallel: false,
      failures: [],
      prelude: { advance: 4, from: 0, length: 1 },
      ops: [{ kind: 'tick', advance: 0, lag: 0 }],
    },
  ],
];

test('the planner over random ticks, failures, backfills and reruns: no gap, no overlap, no second effect', async () => {
  // fast-check reports the seed and the shrunk scenario; the assertion that failed is kept here.
  let last: unknown;
  const property = fc.asyncProperty(scenarioArb, async (s) => {
    try {
      await runScenario(s);
    } catch (err) {
      last = err;
      throw err;
    }
  });
  try {
    await fc.assert(property, { numRuns: Number(process.env.PROPERTY_RUNS ?? 50), examples: EXAMPLES });
  } catch (err) {
    const why = last instanceof Error ? last.message : String(last);
    throw new Error(`${err instanceof Error ? err.message : String(err)}\nFailed with: ${why}`);
  }
});
