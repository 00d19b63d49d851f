// A batched backfill of a job that has never ticked: its windows' commits move the job's
// watermark, so the lag watch does not report as behind a job whose windows are all done.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { readWatermark } from '../../../db/ledger.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { insertOrders, ordersBetween } from '../../helpers/jobs.js';
import { directActivities } from '../../helpers/windows.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

test("a backfill before the job's first tick: the watermark ends after its windows, and the job is not lagging", async () => {
  const job = 'bw-first';
  const from = '2026-03-01T00:00:00Z';
  const to = '2026-03-01T08:00:00Z';
  await insertOrders(t.db, ordersBetween(job, from, to, 40));
  const acts = directActivities(t.db, [
    { name: job, grid: '1h', timezone: 'UTC', start: from, lateness: '0m', handler: summariseWindow },
  ]);
  const page = await acts.planBackfill({ job, from, to, limit: 500 });
  const batch = await acts.processWindowBatch({
    job,
    windows: page.windows,
    policy: page.policy,
    trigger: 'backfill',
  });
  assert.deepEqual(
    batch.outcomes.map((o) => o.outcome),
    Array.from({ length: 8 }, () => 'processed'),
  );
  assert.equal((await readWatermark(t.db, job))?.toISOString(), new Date(to).toISOString());
  // Every window up to `to` is done: not behind, no lag incident.
  const lag = await acts.checkLag({ now: '2026-03-01T08:30:00Z' });
  assert.deepEqual(
    lag.reports.filter((r) => r.job === job).map((r) => [r.watermark, r.behind]),
    [[to, 0]],
  );
  const incidents = await t.db.selectFrom('incidents').select('subject').where('job', '=', job).execute();
  assert.deepEqual(incidents, []);
});
