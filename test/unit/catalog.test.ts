// Job definitions: every bad field refused by name before anything runs; defaults and preview.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildCatalog } from '../../jobs/catalog.js';
import { loadConfig } from '../../config/env.js';
import { type JobSpec } from '../../schedules/job.js';
import {
  defaultTick,
  describeTick,
  defineCatalog,
  defineJob,
  JobDefinitionError,
  UnknownJobError,
} from '../../schedules/define.js';
import { formatPreview, previewJob } from '../../schedules/preview.js';
import { parseGrid, type Grid } from '../../schedules/windows.js';

const handler: JobSpec['handler'] = async () => ({ input: 0, applied: 0, quarantined: 0 });
const base: JobSpec = { name: 'ok-job', grid: '1h', handler };

function refused(spec: Partial<JobSpec>, field: string, fragment: string): void {
  assert.throws(
    () => defineJob({ ...base, ...spec } as JobSpec),
    (err: unknown) => {
      assert.ok(err instanceof JobDefinitionError, `not a JobDefinitionError: ${String(err)}`);
      assert.equal(err.field, field);
      assert.equal(err.job, (spec.name as string | undefined) ?? 'ok-job');
      assert.match(err.message, new RegExp(fragment));
      return true;
    },
  );
}

describe('bad job definitions are refused with the job and the field', () => {
  test('invalid cron', () => refused({ tick: { cron: '61 * * * *' } }, 'tick.cron', 'not valid cron'));
  test('cron with the wrong number of fields', () =>
    refused({ tick: { cron: '* * * *' } }, 'tick.cron', '5 fields'));
  test('cron restricting both day fields', () =>
    refused({ tick: { cron: '0 6 1 * 1' } }, 'tick.cron', 'both day-of-month and day-of-week'));
  test('unknown time zone', () =>
    refused({ timezone: 'Mars/Olympus' }, 'timezone', 'unknown time zone "Mars/Olympus"'));
  test('unknown tick time zone', () =>
    refused(
      { tick: { cron: '0 6 * * *', timezone: 'Europe/Nowhere' } },
      'tick.timezone',
      'unknown time zone',
    ));
  test('non-positive grid', () => refused({ grid: '0m' }, 'grid', 'too small'));
  test('negative grid', () => refused({ grid: '-1h' }, 'grid', 'not a grid'));
  test('negative lateness', () => refused({ lateness: '-5m' }, 'lateness', 'not a duration'));
  test('cap below 1', () => refused({ maxCatchUp: 0 }, 'maxCatchUp', 'at least 1'));
  test('fractional cap', () => refused({ maxCatchUp: 2.5 }, 'maxCatchUp', 'whole number'));
  test('bad name', () => refused({ name: 'Bad Name' }, 'name', 'lowercase'));
  test('start off the grid', () =>
    refused({ start: '2026-03-01T10:30:00Z' }, 'start', 'not a window boundary'));
  test('start not an instant', () => refused({ start: 'yesterday' }, 'start', 'ISO-8601'));
  test('missing handler', () => refused({ handler: undefined }, 'handler', 'function'));
  test('unknown field', () => refused({ ...({ latness: '5m' } as object) }, '(job)', 'latness'));
  // from == to is an empty range: the window would wait for it forever, silently.
  test('allowed hours that never open', () =>
    refused({ allowedHours: { from: '02:00', to: '02:00:00' } }, 'allowedHours', 'never open'));
  test('retry interval inverted', () =>
    refused(
      { retry: { initialInterval: '1m', maximumInterval: '1s' } },
      'retry.maximumInterval',
      'initialInterval',
    ));
  // Temporal reads the intervals itself: zero or a space would fail every window's activity.
  test('retry interval of zero', () =>
    refused({ retry: { initialInterval: '0ms' } }, 'retry.initialInterval', 'more than zero'));
  test('retry interval with a space', () =>
    refused({ retry: { maximumInterval: ' 2m' } }, 'retry.maximumInterval', 'more than zero'));
  test('duplicate job name', () => {
    assert.throws(
      () => defineCatalog([base, { ...base }]),
      (err: unknown) =>
        err instanceof JobDefinitionError && err.field === 'name' && /duplicate/.test(err.message),
    );
  });
  test('unknown job lookups name the catalog', () => {
    const catalog = defineCatalog([base]);
    assert.throws(
      () => catalog.get('nope'),
      (err: unknown) => err instanceof UnknownJobError && /ok-job/.test(err.message),
    );
  });
});

describe('defaults', () => {
  test('a job gets sensible defaults, frozen', () => {
    const job = defineJob(base);
    assert.equal(job.timezone, 'UTC');
    assert.equal(job.latenessMs, 0);
    assert.equal(job.maxCatchUp, 24);
    assert.equal(job.retry.maximumAttempts, 5);
    assert.deepEqual(job.tick, { kind: 'interval', everyMs: 3_600_000, offsetMs: 0, derived: true });
    assert.ok(Object.isFrozen(job));
  });
  const g = (t: string): Grid => parseGrid(t) as Grid;
  test('the tick derived from the grid fires at each boundary plus the lateness, to the second', () => {
    const every = (grid: string, latenessMs: number) => {
      const t = defaultTick(g(grid), latenessMs);
      return t.kind === 'interval' ? [t.everyMs, t.offsetMs] : t;
    };
    assert.deepEqual(every('1m', 10_000), [60_000, 10_000]);
    assert.deepEqual(every('15m', 0), [900_000, 0]);
    assert.deepEqual(every('15m', 2 * 60_000), [900_000, 120_000]);
    assert.deepEqual(every('5m', 12 * 60_000), [300_000, 120_000]);
    assert.deepEqual(every('1h', 5 * 60_000), [3_600_000, 300_000]);
    assert.deepEqual(every('6h', 90 * 60_000), [21_600_000, 5_400_000]);
    assert.deepEqual(every('7h', 0), [25_200_000, 0]);
    assert.deepEqual(every('1d', 30_000), [86_400_000, 30_000]);
    assert.deepEqual(every('1m', 500), [60_000, 1_000], 'rounded up to the second, never early');
    assert.deepEqual(every('day', 10 * 60_000), [3_600_000, 600_000], 'calendar grids: hourly');
    assert.equal(describeTick(defaultTick(g('1m'), 10_000)), 'every 1m at +10s (UTC)');
  });
  test('the shipped catalog is valid', () => {
    const catalog = buildCatalog(loadConfig({}));
    assert.ok(catalog.jobs.length >= 1);
    assert.ok(catalog.has('sales-hourly'));
  });
});

describe('preview', () => {
  test('next fire times and next windows', () => {
    const job = defineJob({
      ...base,
      grid: 'day',
      timezone: 'Europe/Berlin',
      lateness: '10m',
      tick: { cron: '15 0 * * *' },
    });
    const p = previewJob(job, new Date('2026-03-28T12:00:00Z'), 3);
    assert.deepEqual(p.tick.next, ['2026-03-28T23:15:00Z', '2026-03-29T22:15:00Z', '2026-03-30T22:15:00Z']);
    assert.deepEqual(p.windows[1], {
      start: '2026-03-28T23:00:00Z',
      end: '2026-03-29T22:00:00Z',
      processableFrom: '2026-03-29T22:10:00Z',
    });
    assert.match(formatPreview(p), /tick: "15 0 \* \* \*" in Europe\/Berlin/);
  });
});

test('writes[].volatile names columns; anything else is refused naming the field', () => {
  const job = (volatile: unknown) => ({
    name: 'v',
    grid: '1h',
    timezone: 'UTC',
    handler: async () => ({ input: 0, applied: 0 }),
    writes: [{ table: 'daily_sales', key: ['job', 'day'], volatile }],
  });
  assert.deepEqual(defineCatalog([job(['updated_at'])] as never).get('v').writes![0]!.volatile, [
    'updated_at',
  ]);
  assert.throws(() => defineCatalog([job(['no such; drop'])] as never), /writes.*volatile/);
});
