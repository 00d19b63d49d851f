// The jobs overview (`tidemark jobs`, the web page's table): a job's lag counts from its watermark,
// or from its declared start when it never ticked, the same as the watch and /metrics count it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from '@temporalio/client';
import { windowsBehind } from '../../../activities/watch.js';
import { jobsOverview } from '../../../operator/overview.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

test('a job that never ticked lags from its start; one that ticked from its watermark; one without either has no lag', async () => {
  const catalog = defineCatalog([
    salesJob('never-ticked', { start: '2026-03-02T00:00:00Z' }),
    salesJob('ticked', { start: '2026-03-01T00:00:00Z' }),
    salesJob('no-start'),
  ]);
  await t.db
    .insertInto('job_watermarks')
    .values({ job: 'ticked', watermark: new Date('2026-03-02T10:00:00Z'), updated_at: new Date() })
    .execute();
  const now = new Date('2026-03-02T12:30:00Z');
  const rows = await jobsOverview(t.db, {} as Client, catalog, now, { schedules: new Map() });
  const row = (job: string) => rows.find((r) => r.job === job)!;
  assert.deepEqual(
    [row('never-ticked').watermark, row('never-ticked').lagWindows],
    [null, windowsBehind(catalog.get('never-ticked'), new Date('2026-03-02T00:00:00Z'), now)],
  );
  assert.ok(row('never-ticked').lagWindows! >= 11, `lag ${row('never-ticked').lagWindows}`);
  assert.deepEqual(
    [row('ticked').watermark, row('ticked').lagWindows],
    ['2026-03-02T10:00:00Z', windowsBehind(catalog.get('ticked'), new Date('2026-03-02T10:00:00Z'), now)],
  );
  assert.deepEqual([row('no-start').watermark, row('no-start').lagWindows], [null, null]);
});
