// Many jobs on one grid: their ticks are spread over the seconds after the lateness, by name, so a
// thousand five-minute jobs do not start a thousand tick workflows in the same second.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defineCatalog, describeTick, TICKS_AT_ONCE } from '../../schedules/define.js';
import type { JobSpec, Tick } from '../../schedules/job.js';
import { withHousekeeping } from '../../jobs/housekeeping/index.js';

const spec = (name: string, extra: Partial<JobSpec> = {}): JobSpec => ({
  name,
  grid: '5m',
  lateness: '1m',
  handler: async () => ({ input: 0, applied: 0, quarantined: 0 }),
  ...extra,
});
const offsets = (ticks: Tick[]) => ticks.map((t) => (t.kind === 'interval' ? t.offsetMs : -1));

test(`up to ${TICKS_AT_ONCE} jobs on one tick: each fires at its lateness, as before`, () => {
  const catalog = defineCatalog(Array.from({ length: TICKS_AT_ONCE }, (_, i) => spec(`shop-${i}`)));
  assert.deepEqual(new Set(offsets(catalog.jobs.map((j) => j.tick))), new Set([60_000]));
});

test('a thousand five-minute jobs: spread by name over the minute after the lateness, whole seconds', () => {
  const names = Array.from({ length: 1_000 }, (_, i) => `shop-${i}`);
  const catalog = defineCatalog(names.map((n) => spec(n)));
  const spread = offsets(catalog.jobs.map((j) => j.tick));
  for (const o of spread) {
    assert.ok(o >= 60_000 && o < 120_000, `${o} ms: within a minute after the lateness`);
    assert.equal(o % 1_000, 0, 'whole seconds (Temporal rounds offsets to seconds)');
  }
  const perSecond = new Map<number, number>();
  for (const o of spread) perSecond.set(o, (perSecond.get(o) ?? 0) + 1);
  assert.equal(perSecond.size, 60, 'every second of the minute used');
  assert.ok(
    Math.max(...perSecond.values()) <= 30,
    `at most 30 ticks a second (${Math.max(...perSecond.values())})`,
  );
  // By name: the same job fires at the same second in every process and after any catalog change.
  const again = defineCatalog([...names].reverse().map((n) => spec(n)));
  assert.equal(again.get('shop-7').tick.kind, 'interval');
  assert.deepEqual(again.get('shop-7').tick, catalog.get('shop-7').tick);
  // Asked not to, the catalog keeps every tick at its lateness.
  const exact = defineCatalog(
    names.map((n) => spec(n)),
    { spreadTicks: false },
  );
  assert.deepEqual(new Set(offsets(exact.jobs.map((j) => j.tick))), new Set([60_000]));
  assert.match(
    describeTick(catalog.get('shop-7').tick),
    /^every 5m at \+(1m|\d+s) \(UTC\)$/,
    'the second it fires, said',
  );
});

test('a hundred jobs on one tick: spread over a few seconds only, what it takes', () => {
  for (const n of [51, 100]) {
    const catalog = defineCatalog(Array.from({ length: n }, (_, i) => spec(`few-${i}`)));
    const spread = offsets(catalog.jobs.map((j) => j.tick));
    assert.ok(
      spread.every((o) => o >= 60_000 && o < 64_000),
      `${n} jobs: within 4 s after the lateness (${Math.max(...spread)} ms)`,
    );
    assert.ok(new Set(spread).size > 1, `${n} jobs: spread at all`);
  }
});

test('the spread is at most a fifth of the interval; a cron tick and a small group are left alone', () => {
  const minutely = defineCatalog(
    Array.from({ length: 200 }, (_, i) => spec(`m-${i}`, { grid: '1m', lateness: '10s' })),
  );
  for (const o of offsets(minutely.jobs.map((j) => j.tick)))
    assert.ok(o >= 10_000 && o < 22_000, `${o} ms: a minutely job's tick moves by at most 12 s`);
  const mixed = defineCatalog([
    ...Array.from({ length: 100 }, (_, i) => spec(`c-${i}`, { tick: { cron: '15 0 * * *' } })),
    spec('alone', { grid: '1h', lateness: '5m' }),
  ]);
  assert.deepEqual(mixed.get('alone').tick, {
    kind: 'interval',
    everyMs: 3_600_000,
    offsetMs: 300_000,
    derived: true,
  });
  assert.equal(mixed.get('c-3').tick.kind, 'cron');
});

test('a catalog built again from its jobs (housekeeping added, as every entry point does) keeps each tick', () => {
  const settings = { TIDEMARK_STATE_DIR: '/tmp/tick-spread', TIDEMARK_HOUSEKEEPING: 'on' as const };
  for (const [grid, lateness] of [
    ['5m', '1m'],
    ['1m', '10s'],
  ] as const) {
    const catalog = defineCatalog(
      Array.from({ length: 1_000 }, (_, i) => spec(`s-${i}`, { grid, lateness })),
    );
    const loaded = withHousekeeping(catalog, settings);
    assert.ok(loaded.has('tidemark-housekeeping'));
    const moved = catalog.jobs.filter(
      (j) => JSON.stringify(loaded.get(j.name).tick) !== JSON.stringify(j.tick),
    );
    assert.deepEqual(
      moved.map((j) => j.name),
      [],
      `${grid}: ticks moved again`,
    );
    const again = defineCatalog(catalog.jobs);
    assert.deepEqual(
      again.jobs.map((j) => j.tick),
      catalog.jobs.map((j) => j.tick),
    );
  }
  // Asked not to spread, the catalog stays so with housekeeping added.
  const exact = withHousekeeping(
    defineCatalog(
      Array.from({ length: 100 }, (_, i) => spec(`e-${i}`)),
      { spreadTicks: false },
    ),
    settings,
  );
  assert.deepEqual(
    new Set(offsets(exact.jobs.filter((j) => j.name !== 'tidemark-housekeeping').map((j) => j.tick))),
    new Set([60_000]),
  );
});
