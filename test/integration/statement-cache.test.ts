// A handler's statements are planned once per connection, not once per window (db/connection.ts):
// the window's held connection prepares each parameterised statement under a name of its own. What
// could go wrong with that: a statement that failed to prepare, a table changed under a cached plan.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { createDb } from '../../db/database.js';
import type { Database } from '../../db/schema.js';
import type { JobSpec } from '../../schedules/job.js';
import type { WindowResult } from '../../contract/workflows.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../helpers/windows.js';

const T0 = Date.parse('2026-04-01T00:00:00Z');
const policy = windowPolicy(3, 30_000);
let t: TestDb;
let single: Kysely<Database>;
let pair: Kysely<Database>;

before(async () => {
  t = await createTestDb();
  await sql`create table cached (k integer primary key, v text)`.execute(t.db);
  // One connection: every window runs on the same one.
  single = createDb(t.url, { max: 1 });
  pair = createDb(t.url, { max: 2 });
});
after(async () => {
  await single?.destroy();
  await pair?.destroy();
  await t?.drop();
});

const windowOf = (job: string, i: number) => hourlyWindow(job, T0, i, policy);
const run = async (db: Kysely<Database>, job: JobSpec, i: number) =>
  (await directActivities(db, [job]).processWindow(windowOf(job.name, i))) as WindowResult;

test("a handler's parameterised statement is prepared once on the connection and its plan reused", async () => {
  const text = 'insert into cached (k, v) values ($1, $2)';
  const job = hourlyJob('prepared-once', T0, async (ctx) => {
    await sql`insert into cached (k, v) values (${1000 + ctx.window.start.getHours()}, ${'x'})`.execute(
      ctx.trx,
    );
    return { input: 1, applied: 1, quarantined: 0 };
  });
  for (let i = 0; i < 4; i++) assert.equal((await run(single, job, i)).outcome, 'processed');
  const r = await sql<{ plans: number }>`
    select (generic_plans + custom_plans)::int as plans from pg_prepared_statements
     where statement = ${text}`.execute(single);
  assert.deepEqual(r.rows, [{ plans: 4 }]);
});

test('a statement that failed to prepare (its table missing) prepares again once the table exists', async () => {
  const select = (ctx: Parameters<JobSpec['handler']>[0]) =>
    sql`select count(*)::int as n from later where k > ${0}`.execute(ctx.trx);
  let missing = 0;
  const job = hourlyJob('prepare-fails', T0, async (ctx) => {
    // The handler survives the error in a savepoint of its own and commits without the table.
    await sql`savepoint probe`.execute(ctx.trx);
    try {
      await select(ctx);
      await sql`release savepoint probe`.execute(ctx.trx);
    } catch {
      missing++;
      await sql`rollback to savepoint probe`.execute(ctx.trx);
    }
    return { input: 0, applied: 0, quarantined: 0 };
  });
  assert.equal((await run(single, job, 0)).outcome, 'processed');
  assert.equal(missing, 1);
  await sql`create table later (k integer)`.execute(t.db);
  assert.equal((await run(single, job, 1)).outcome, 'processed');
  assert.equal(missing, 1, 'the statement failed on the window after its table was created');
});

test('a table changed under cached plans: one attempt fails, the retry prepares it again on any connection', async () => {
  await sql`create table widened (k integer primary key)`.execute(t.db);
  await sql`insert into widened values (1)`.execute(t.db);
  const job = hourlyJob('widened', T0, async (ctx) => {
    await sql`select * from widened where k = ${1}`.execute(ctx.trx);
    return { input: 0, applied: 0, quarantined: 0 };
  });
  // Both connections prepare it: two windows at once hold both.
  assert.deepEqual(
    (await Promise.all([run(pair, job, 0), run(pair, job, 1)])).map((r) => r.outcome),
    ['processed', 'processed'],
  );
  await sql`alter table widened add column v text`.execute(t.db);
  // The failed attempt's connection is closed; its retry runs on the other one, whose plan is as
  // stale: it must not fail too.
  const failures: string[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const r = await run(pair, job, 2).catch((e: Error) => e);
    if (!(r instanceof Error)) break;
    failures.push(r.message);
  }
  assert.ok(failures.length <= 1, failures.join('\n'));
  assert.equal((await run(pair, job, 3)).outcome, 'processed');
});
