// What a scrape of /metrics costs the database: the gauges read the ledger in a few statements
// whatever the number of jobs, and scrapes within the snapshot's life (a few seconds) read nothing
// again, so a dashboard scraping often, or several Prometheus replicas, cost what one scrape does.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { KyselyPlugin } from 'kysely';
import { windowsBehind } from '../../../activities/watch.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createMetrics } from '../../../workers/metrics.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';
import { parseMetrics, valueOf } from '../../helpers/metrics.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

test('a scrape reads the ledger in a few statements for 300 jobs, and one within the snapshot not at all', async () => {
  let statements = 0;
  const counting: KyselyPlugin = {
    transformQuery: (args) => {
      statements++;
      return args.node;
    },
    transformResult: async (args) => args.result,
  };
  const catalog = defineCatalog(
    Array.from({ length: 300 }, (_, i) => salesJob(`metered-${i}`, { start: '2026-03-02T00:00:00Z' })),
  );
  let clock = new Date('2026-03-02T12:00:00Z');
  const { registry } = createMetrics({ db: t.db.withPlugin(counting), catalog, now: () => clock });
  const first = parseMetrics(await registry.metrics());
  const lag = valueOf(first, 'tidemark_lag_windows', { job: 'metered-299' });
  assert.equal(lag, windowsBehind(catalog.get('metered-299'), new Date('2026-03-02T00:00:00Z'), clock));
  assert.ok(statements <= 5, `${statements} statements for one scrape of 300 jobs`);
  const after1 = statements;
  clock = new Date('2026-03-02T13:00:00Z');
  const again = parseMetrics(await registry.metrics());
  assert.equal(statements, after1, 'a scrape within the snapshot reads nothing');
  assert.equal(valueOf(again, 'tidemark_lag_windows', { job: 'metered-299' }), lag, 'the snapshot it shares');
});
