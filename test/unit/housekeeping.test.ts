// The built-in housekeeping job's settings: on by default in the demo catalog, off by
// TIDEMARK_HOUSEKEEPING=off, and a bad value refused naming the setting.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../../config/env.js';
import { buildCatalog } from '../../jobs/catalog.js';
import { DEFAULT_RETENTION, HOUSEKEEPING_JOB, housekeeping } from '../../jobs/housekeeping/index.js';
import { defineJob, JobDefinitionError } from '../../schedules/define.js';

test('housekeeping is on in the demo catalog, daily at a quiet hour, and TIDEMARK_HOUSEKEEPING=off turns it off', () => {
  const job = buildCatalog(loadConfig({})).get(HOUSEKEEPING_JOB);
  assert.equal(job.grid.label, 'day');
  assert.deepEqual(job.tick, { kind: 'cron', cron: '17 3 * * *', timezone: 'UTC', derived: false });
  assert.equal(buildCatalog(loadConfig({ TIDEMARK_HOUSEKEEPING: 'off' })).has(HOUSEKEEPING_JOB), false);
  assert.deepEqual(DEFAULT_RETENTION, {
    runs: '90d',
    attempts: '90d',
    incidents: '180d',
    quarantine: '90d',
    markers: '90d',
  });
});

test('retention and batch size from the environment reach the job', () => {
  const config = loadConfig({
    TIDEMARK_HOUSEKEEPING_RETENTION: 'runs=30d, quarantine=7d',
    TIDEMARK_HOUSEKEEPING_BATCH_SIZE: '250',
  });
  assert.deepEqual(config.TIDEMARK_HOUSEKEEPING_RETENTION, { runs: '30d', quarantine: '7d' });
  assert.equal(config.TIDEMARK_HOUSEKEEPING_BATCH_SIZE, 250);
  assert.ok(buildCatalog(config).has(HOUSEKEEPING_JOB));
});

test('bad settings are refused, naming the setting', () => {
  const refusedEnv = (env: Record<string, string>, name: string) =>
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => err instanceof ConfigError && err.message.includes(name),
    );
  refusedEnv({ TIDEMARK_HOUSEKEEPING: 'maybe' }, 'TIDEMARK_HOUSEKEEPING');
  refusedEnv({ TIDEMARK_HOUSEKEEPING_RETENTION: 'runs=forever' }, 'TIDEMARK_HOUSEKEEPING_RETENTION');
  refusedEnv({ TIDEMARK_HOUSEKEEPING_RETENTION: 'approvals=30d' }, 'TIDEMARK_HOUSEKEEPING_RETENTION');
  refusedEnv({ TIDEMARK_HOUSEKEEPING_BATCH_SIZE: '0' }, 'TIDEMARK_HOUSEKEEPING_BATCH_SIZE');
  refusedEnv({ TIDEMARK_HOUSEKEEPING_BATCH_SIZE: '1000000' }, 'TIDEMARK_HOUSEKEEPING_BATCH_SIZE');

  const refusedOption = (opts: Partial<Parameters<typeof housekeeping>[0]>, field: RegExp) =>
    assert.throws(
      () => defineJob(housekeeping({ stateDir: '/tmp/x', ...opts })),
      (err: unknown) => err instanceof JobDefinitionError && field.test(err.message),
    );
  refusedOption({ batchSize: 0 }, /housekeeping\.batchSize/);
  refusedOption({ retention: { runs: 'ninety days' } }, /housekeeping\.retention\.runs/);
  refusedOption({ retention: { approvals: '30d' } as never }, /housekeeping\.retention/);
  refusedOption({ budget: 'soon' }, /housekeeping\.budget/);
  refusedOption({ timezone: 'Mars/Olympus' }, /timezone/);
});

test('a retention under a day is refused ("1m" is a minute, not a month): retried batches read their earlier attempts\' run records', () => {
  assert.throws(
    () => loadConfig({ TIDEMARK_HOUSEKEEPING_RETENTION: 'runs=1m' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      err.message.includes('TIDEMARK_HOUSEKEEPING_RETENTION') &&
      err.message.includes('at least 1d'),
  );
  assert.throws(
    () => loadConfig({ TIDEMARK_HOUSEKEEPING_RETENTION: 'quarantine=0d' }),
    (err: unknown) => err instanceof ConfigError && err.message.includes('at least 1d'),
  );
  assert.throws(
    () => defineJob(housekeeping({ stateDir: '/tmp/x', retention: { attempts: '12h' } })),
    (err: unknown) =>
      err instanceof JobDefinitionError && /housekeeping\.retention\.attempts.*at least 1d/.test(err.message),
  );
  assert.doesNotThrow(() => loadConfig({ TIDEMARK_HOUSEKEEPING_RETENTION: 'runs=1d,attempts=24h' }));
});
