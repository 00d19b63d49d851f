// A handler's statements are planned once per connection, not once per window (db/connection.ts):
// the window's held connection prepares each parameterised statement under a name of its own. What
// could go wrong with that: a statement that failed to prepare, a table changed under a cached plan,
// one text read under two search paths, errors a handler recovers from in savepoints, a column retyped
// under statements kept on every connection of the pool; and the connection's refusal of session
// settings, however they are written.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { createDb } from '../../../db/database.js';
import type { Database } from '../../../db/schema.js';
import type { JobSpec } from '../../../schedules/job.js';
import type { WindowResult } from '../../../contract/workflows.js';
import { withConnection } from '../../../db/connection.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../../helpers/windows.js';

const T0 = Date.parse('2026-04-01T00:00:00Z');
const policy = windowPolicy(3, 30_000);
let t: TestDb;
let single: Kysely<Database>;
let pair: Kysely<Database>;

before(async () => {
  t = await createTestDb();
  await sql`create table public.cached (k integer primary key, v text)`.execute(t.db);
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
  const text = 'insert into public.cached (k, v) values ($1, $2)';
  const job = hourlyJob('prepared-once', T0, async (ctx) => {
    await sql`insert into public.cached (k, v) values (${1000 + ctx.window.start.getHours()}, ${'x'})`.execute(
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
    sql`select count(*)::int as n from public.later where k > ${0}`.execute(ctx.trx);
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
  await sql`create table public.later (k integer)`.execute(t.db);
  assert.equal((await run(single, job, 1)).outcome, 'processed');
  assert.equal(missing, 1, 'the statement failed on the window after its table was created');
});

test('a table changed under cached plans: one attempt fails, the retry prepares it again on any connection', async () => {
  await sql`create table public.widened (k integer primary key)`.execute(t.db);
  await sql`insert into public.widened values (1)`.execute(t.db);
  const job = hourlyJob('widened', T0, async (ctx) => {
    await sql`select * from public.widened where k = ${1}`.execute(ctx.trx);
    return { input: 0, applied: 0, quarantined: 0 };
  });
  // Both connections prepare it: two windows at once hold both.
  assert.deepEqual(
    (await Promise.all([run(pair, job, 0), run(pair, job, 1)])).map((r) => r.outcome),
    ['processed', 'processed'],
  );
  await sql`alter table public.widened add column v text`.execute(t.db);
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

// Kept statements under search paths, savepoints and retyped columns, the refusal of session settings
// and the attempt's statement_timeout, on a database of their own.
describe('kept statements and session settings on the held connection', () => {
  const T0 = Date.parse('2026-05-01T00:00:00Z');
  const policy = windowPolicy(3, 30_000);
  let t: TestDb;
  let single: Kysely<Database>;
  let four: Kysely<Database>;

  before(async () => {
    t = await createTestDb();
    // One connection: every window runs on the same one.
    single = createDb(t.url, { max: 1 });
    four = createDb(t.url, { max: 4 });
  });
  after(async () => {
    await single?.destroy();
    await four?.destroy();
    await t?.drop();
  });

  const run = async (job: JobSpec, i: number) =>
    (await directActivities(single, [job]).processWindow(
      hourlyWindow(job.name, T0, i, policy),
    )) as WindowResult;

  /** Runs window i as Temporal would: attempts until one does not throw; returns the failed attempts' errors. */
  async function attempts(job: JobSpec, i: number): Promise<string[]> {
    const failures: string[] = [];
    for (let n = 1; n <= 3; n++) {
      const r = await run(job, i).catch((e: Error) => e);
      if (!(r instanceof Error)) return failures;
      failures.push(r.message);
    }
    throw new Error(`window ${i} failed every attempt:\n${failures.join('\n')}`);
  }

  test('one statement text read under two search paths (SET LOCAL) fails no more than one attempt', async () => {
    await sql`create schema tenant_a`.execute(t.db);
    await sql`create schema tenant_b`.execute(t.db);
    await sql`create table tenant_a.items (k integer, v text)`.execute(t.db);
    await sql`create table tenant_b.items (k integer, v text, extra integer)`.execute(t.db);
    // Windows of even hours read tenant a, odd hours tenant b: the same text, a different table.
    const job = hourlyJob('tenants', T0, async (ctx) => {
      const tenant = ctx.window.start.getUTCHours() % 2 === 0 ? 'tenant_a' : 'tenant_b';
      await sql.raw(`set local search_path = ${tenant}, public`).execute(ctx.trx);
      await sql`select * from items where k > ${0}`.execute(ctx.trx);
      return { input: 0, applied: 0, quarantined: 0 };
    });
    const failures: string[] = [];
    for (let i = 0; i < 6; i++) failures.push(...(await attempts(job, i)));
    assert.ok(failures.length <= 1, `${failures.length} attempts failed:\n${failures.join('\n')}`);
  });

  test("a handler's errors it recovers from (savepoints) leave no prepared statement behind on the connection", async () => {
    await sql`create table public.once (k integer primary key)`.execute(t.db);
    const dupes = 40;
    // A handler that keeps duplicates aside one by one (a savepoint around each insert).
    const job = hourlyJob('per-row', T0, async (ctx) => {
      let applied = 0;
      for (let k = 0; k < dupes; k++) {
        await sql`savepoint row`.execute(ctx.trx);
        try {
          await sql`insert into public.once (k) values (${k % 2})`.execute(ctx.trx);
          await sql`release savepoint row`.execute(ctx.trx);
          applied++;
        } catch {
          await sql`rollback to savepoint row`.execute(ctx.trx);
        }
      }
      return { input: dupes, applied, quarantined: dupes - applied };
    });
    assert.equal((await run(job, 0)).outcome, 'processed');
    const kept = await withConnection(single, async (_c, client) => {
      const r = await client.query<{ n: number }>(
        `select count(*)::int as n from pg_prepared_statements where statement like 'insert into public.once%'`,
      );
      return r.rows[0]!.n;
    });
    assert.equal(kept, 1, `the insert is prepared ${kept} times on one connection`);
  });

  test("a kept statement whose parameter's type went stale (a column's type changed) is prepared again, though the handler caught its error", async () => {
    await sql`create table public.retyped (k integer, v integer)`.execute(t.db);
    await sql`insert into public.retyped values (1, 1)`.execute(t.db);
    const failed: string[] = [];
    const job = hourlyJob('retyped', T0, async (ctx) => {
      await sql`savepoint probe`.execute(ctx.trx);
      try {
        await sql`select count(*)::int as n from public.retyped where v > ${0}`.execute(ctx.trx);
        await sql`release savepoint probe`.execute(ctx.trx);
      } catch (err) {
        failed.push(`${ctx.window.start.toISOString()}: ${(err as Error).message}`);
        await sql`rollback to savepoint probe`.execute(ctx.trx);
      }
      return { input: 0, applied: 0, quarantined: 0 };
    });
    assert.equal((await run(job, 0)).outcome, 'processed');
    // The kept statement's $1 is an integer; compared with text now, it fails until prepared again.
    await sql`alter table public.retyped alter column v type text`.execute(t.db);
    for (let i = 1; i <= 3; i++) assert.equal((await run(job, i)).outcome, 'processed');
    assert.ok(failed.length <= 1, failed.join('\n'));
  });

  test("a column's type changed under statements kept on every connection of the pool: one attempt fails, not one per connection", async () => {
    await sql`create table public.recast (k integer, v integer)`.execute(t.db);
    const job = hourlyJob('recast', T0, async (ctx) => {
      await sql`select count(*) from public.recast where v > ${0}`.execute(ctx.trx);
      return { input: 0, applied: 0, quarantined: 0 };
    });
    const runOn = (i: number) =>
      directActivities(four, [job]).processWindow(
        hourlyWindow(job.name, T0, i, policy),
      ) as Promise<WindowResult>;
    // Four windows at once: each of the four connections keeps the statement.
    await Promise.all([0, 1, 2, 3].map(runOn));
    await sql`alter table public.recast alter column v type text`.execute(t.db);
    // One window at a time: the first to meet the change fails; the others' connections must not.
    const failures: string[] = [];
    for (let i = 4; i < 12; i++) {
      const r = await runOn(i).catch((e: Error) => e);
      if (r instanceof Error) failures.push(r.message);
    }
    assert.ok(failures.length <= 1, `${failures.length} attempts failed:\n${failures.join('\n')}`);
  });

  test('a session setting is refused however the text is written (comments, several statements, set_config)', async () => {
    const current = () =>
      withConnection(single, async (_c, client) => {
        const r = await client.query(`select current_setting('statement_timeout') s,
        current_setting('TimeZone') z, current_setting('app.tenant', true) a,
        current_setting('work_mem') w`);
        return r.rows[0] as Record<string, string | null>;
      });
    const clean = await current();
    const settings = [
      "/* the reports' zone */ set time zone 'Pacific/Chatham'",
      "-- bigger sorts\nset work_mem = '64MB'",
      'select 1; set statement_timeout = 2',
      "select set_config('app.tenant', 'acme', false)",
    ];
    const leaked: string[] = [];
    for (const [i, text] of settings.entries()) {
      const job = hourlyJob(`session-${i}`, T0, async (ctx) => {
        await sql.raw(text).execute(ctx.trx);
        return { input: 0, applied: 0, quarantined: 0 };
      });
      await run(job, i).catch(() => undefined);
      const now = await current();
      if (JSON.stringify(now) !== JSON.stringify(clean))
        leaked.push(`${JSON.stringify(text)}: ${JSON.stringify(now)}`);
      // The next case starts from a clean connection.
      await withConnection(single, async () => {
        throw new Error('close it');
      }).catch(() => undefined);
    }
    assert.deepEqual(leaked, []);
  });

  test('SET LOCAL, SET TRANSACTION and SET CONSTRAINTS are still allowed, written any way', async () => {
    await sql`create table public.deferred (k integer primary key deferrable initially immediate)`.execute(
      t.db,
    );
    const job = hourlyJob('local-sets', T0, async (ctx) => {
      await sql.raw('/* keep it short */ set local statement_timeout = 5000').execute(ctx.trx);
      await sql.raw('SET CONSTRAINTS ALL DEFERRED').execute(ctx.trx);
      await sql.raw("select set_config('app.tenant', 'acme', true)").execute(ctx.trx);
      await sql`insert into public.deferred (k) values (${1})`.execute(ctx.trx);
      return { input: 1, applied: 1, quarantined: 0 };
    });
    assert.equal((await run(job, 0)).outcome, 'processed');
  });

  test("the attempt's statement_timeout does not stay on the connection, after a processed window or an already-done one", async () => {
    const job = hourlyJob('bounded', T0, async (ctx) => {
      const r = await sql<{ s: string }>`select current_setting('statement_timeout') s`.execute(ctx.trx);
      assert.equal(r.rows[0]!.s, '30s');
      return { input: 0, applied: 0, quarantined: 0 };
    });
    const settings = () =>
      withConnection(single, async (_c, client) => {
        const r = await client.query(`select current_setting('statement_timeout') s,
        current_setting('lock_timeout') l, current_setting('idle_in_transaction_session_timeout') i`);
        return r.rows[0] as Record<string, string>;
      });
    assert.equal((await run(job, 0)).outcome, 'processed');
    assert.deepEqual(await settings(), { s: '0', l: '0', i: '0' });
    assert.equal((await run(job, 0)).outcome, 'already-done');
    assert.deepEqual(await settings(), { s: '0', l: '0', i: '0' });
  });
});
