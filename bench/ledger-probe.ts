import { sql } from 'kysely';
import { createActivities } from '../activities/index.js';
import { memoryLogger } from '../activities/logger.js';
import { watermarkOf } from '../db/ledger.js';
import { defineCatalog } from '../schedules/job.js';
import { isoUtc } from '../schedules/windows.js';
import { createTestDb } from '../test/helpers/db.js';
const N = Number(process.env.N ?? 3000);
const HOUR = 3_600_000,
  T0 = Date.parse('2025-01-01T00:00:00Z');
const t = await createTestDb();
const { db } = t;
await sql`create table probe (k int primary key, v int)`.execute(db);
const catalog = defineCatalog([
  {
    name: 'p',
    grid: '1h',
    start: isoUtc(new Date(T0)),
    handler: async (ctx) => {
      await sql`insert into probe values (${(ctx.window.start.getTime() - T0) / HOUR}, 1)`.execute(ctx.trx);
      return { input: 1, applied: 1, quarantined: 0 };
    },
  },
]);
const acts = createActivities({ db, catalog, logger: memoryLogger(), now: () => new Date() });
await watermarkOf(db, 'p', new Date(T0));
const policy = {
  retry: { maximumAttempts: 1, initialInterval: '1s', maximumInterval: '1s', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 60_000,
};
{
  const c0 = process.cpuUsage();
  const s = performance.now();
  for (let i = 0; i < N; i++) await sql`insert into probe values (${-1 - i}, 1)`.execute(db);
  const c = process.cpuUsage(c0);
  console.log(
    `plain wall ${((performance.now() - s) / N).toFixed(3)} ms, node cpu ${((c.user + c.system) / 1000 / N).toFixed(3)} ms`,
  );
}
const c0 = process.cpuUsage();
const s = performance.now();
for (let i = 0; i < N; i++) {
  const st = new Date(T0 + i * HOUR);
  await acts.processWindow({
    job: 'p',
    start: isoUtc(st),
    end: isoUtc(new Date(st.getTime() + HOUR)),
    generation: 0,
    key: `p/${isoUtc(st)}`,
    trigger: 'manual',
    policy,
  });
}
const c = process.cpuUsage(c0);
console.log(
  `wall ${((performance.now() - s) / N).toFixed(3)} ms/window, node cpu ${((c.user + c.system) / 1000 / N).toFixed(3)} ms/window`,
);
await t.drop();
