// The ledger's window transaction on its held connection. Its cost and the handlers' bulk path: a
// processed window costs two round trips besides its handler's (six before); windows of one job
// committing at once still move the watermark over all of them; rows COPYed by a handler commit with
// the window's done marker, or not at all. Then its edges: odd values written as literals, handlers
// that misuse the window transaction, connections killed mid-window, races.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { MockActivityEnvironment } from '@temporalio/testing';
import { withConnection } from '../../../db/connection.js';
import { createDb } from '../../../db/database.js';
import { readWatermark, watermarkOf, claimWindow, finishWindow } from '../../../db/ledger.js';
import type { JobSpec } from '../../../schedules/job.js';
import { isoUtc } from '../../../contract/window-key.js';
import type { WindowInput, WindowResult } from '../../../contract/workflows.js';
import { createTestDb, SCHEMA, statementsSent, tm, type TestDb } from '../../helpers/db.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../../helpers/windows.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-01T00:00:00Z');
let t: TestDb;

before(async () => {
  t = await createTestDb();
  await sql`create table public.landed (k text primary key, note text, at timestamptz, doc jsonb, n numeric)`.execute(
    t.db,
  );
});
after(async () => t?.drop());

const windowOf = (job: string, i: number) => hourlyWindow(job, T0, i, windowPolicy(1, 30_000));
const jobOf = (name: string, handler: JobSpec['handler']) => hourlyJob(name, T0, handler);
const activities = (jobs: JobSpec[]) => directActivities(t.db, jobs);

test("a processed window costs two round trips besides its handler's: the claim carries BEGIN, the finish COMMIT", async () => {
  const job = 'trips';
  const acts = activities([
    jobOf(job, async (ctx) => {
      await sql`select 1`.execute(ctx.trx);
      return { input: 0, applied: 0, quarantined: 0 };
    }),
  ]);
  await watermarkOf(t.db, job, new Date(T0));
  const { result: r, sent } = await statementsSent(t.db, () => acts.processWindow(windowOf(job, 1)));
  assert.equal(r.outcome, 'processed');
  const handler = sent.filter((s) => s === 'select 1');
  assert.equal(handler.length, 1, sent.join(' | '));
  assert.equal(sent.length - handler.length, 2, `the ledger sent: ${sent.join(' | ')}`);
});

test('twenty windows of one job committing at once, in any order: the watermark passes every one', async () => {
  const job = 'together';
  const acts = activities([
    jobOf(job, async (ctx) => {
      // Later windows tend to finish first: each commit must still see the ones before it.
      const i = (ctx.window.start.getTime() - T0) / HOUR;
      await sql`select pg_sleep(${(20 - i) * 0.005})`.execute(ctx.trx);
      return { input: 0, applied: 0, quarantined: 0 };
    }),
  ]);
  await watermarkOf(t.db, job, new Date(T0));
  await acts.processWindow(windowOf(job, 0));
  const results = await Promise.all(
    Array.from({ length: 19 }, (_, i) => acts.processWindow(windowOf(job, i + 1))),
  );
  assert.ok(results.every((r) => r.outcome === 'processed'));
  assert.equal((await readWatermark(t.db, job))?.toISOString(), new Date(T0 + 20 * HOUR).toISOString());
});

const awkward = [
  [
    'tab\there',
    'line\nbreak and \\ backslash',
    '2026-03-01T00:00:01.123Z',
    { quote: 'a "q"', uni: 'ünï 🌊' },
    '12.50',
  ],
  ['nulls', null, null, null, null],
  ['carriage\rreturn', '\\N is text here', '2026-03-01T00:59:59.999Z', [1, 2], '-0.01'],
] as const;

test("rows a handler COPYs commit with the window's done marker: a failed attempt leaves none, the retry lands each once", async () => {
  const job = 'bulk';
  let attempt = 0;
  const acts = activities([
    jobOf(job, async (ctx) => {
      const n = await ctx.copyRows(
        'public.landed',
        ['k', 'note', 'at', 'doc', 'n'],
        awkward.map(([k, note, at, doc, num]) => [k, note, at ? new Date(at) : null, doc, num]),
      );
      if (++attempt === 1) throw new Error('the source went away after the copy');
      return { input: n, applied: n, quarantined: 0 };
    }),
  ]);
  await assert.rejects(acts.processWindow(windowOf(job, 0)), /source went away/);
  assert.equal(
    (await sql<{ n: number }>`select count(*)::int n from public.landed`.execute(t.db)).rows[0]!.n,
    0,
  );
  const r = await acts.processWindow(windowOf(job, 0));
  assert.equal(r.outcome, 'processed');
  assert.deepEqual(r.counts, { input: 3, applied: 3, quarantined: 0 });
  const rows = await sql<{ k: string; note: string | null; at: Date | null; doc: unknown; n: string | null }>`
    select k, note, at, doc, n::text as n from public.landed order by k`.execute(t.db);
  const want = [...awkward]
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))
    .map(([k, note, at, doc, n]) => ({ k, note, at: at ? new Date(at) : null, doc, n }));
  assert.deepEqual(rows.rows, want);
  assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'already-done');
  assert.equal(
    (await sql<{ n: number }>`select count(*)::int n from public.landed`.execute(t.db)).rows[0]!.n,
    3,
  );
});

test('a row with the wrong number of values is refused by position; nothing is copied, the window is not done', async () => {
  const job = 'ragged';
  const acts = activities([
    jobOf(job, async (ctx) => {
      const rows = Array.from({ length: 5000 }, (_, i) => (i === 4321 ? [`r${i}`] : [`r${i}`, 'ok']));
      const n = await ctx.copyRows('public.landed', ['k', 'note'], rows);
      return { input: n, applied: n, quarantined: 0 };
    }),
  ]);
  await assert.rejects(acts.processWindow(windowOf(job, 0)), /row 4321 has 1 values for 2 columns/);
  assert.equal(
    (await sql<{ n: number }>`select count(*)::int n from public.landed where k like 'r%'`.execute(t.db))
      .rows[0]!.n,
    0,
  );
  const marker = await t.db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', job)
    .executeTakeFirst();
  assert.equal(marker?.status, 'failed');
});

test('COPY into a temporary table, then one set-based merge: the staging pattern for rows a window does not own', async () => {
  const job = 'staged';
  await sql`create table public.stock (sku text primary key, qty integer not null)`.execute(t.db);
  await sql`insert into public.stock values ('a', 1), ('b', 2)`.execute(t.db);
  const acts = activities([
    jobOf(job, async (ctx) => {
      await sql`create temporary table stock_in (sku text, qty integer) on commit drop`.execute(ctx.trx);
      const n = await ctx.copyRows(
        'stock_in',
        ['sku', 'qty'],
        [
          ['b', 20],
          ['c', 30],
        ],
      );
      await sql`insert into public.stock select sku, qty from stock_in
                on conflict (sku) do update set qty = excluded.qty`.execute(ctx.trx);
      return { input: n, applied: n, quarantined: 0 };
    }),
  ]);
  assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
  const rows = await sql<{
    sku: string;
    qty: number;
  }>`select sku, qty from public.stock order by sku`.execute(t.db);
  assert.deepEqual(rows.rows, [
    { sku: 'a', qty: 1 },
    { sku: 'b', qty: 20 },
    { sku: 'c', qty: 30 },
  ]);
});

test('on a held connection a transaction is one whatever its first and last statements; a stray BEGIN is refused', async () => {
  await sql`create table public.held (n integer)`.execute(t.db);
  // No statement carries BEGIN or COMMIT: both are sent on their own, and a failure rolls back.
  await assert.rejects(
    withConnection(t.db, (conn) =>
      conn.transaction().execute(async (trx) => {
        await sql`insert into public.held values (1)`.execute(trx);
        throw new Error('handler failed');
      }),
    ),
    /handler failed/,
  );
  await withConnection(t.db, (conn) =>
    conn.transaction().execute(async (trx) => {
      await sql`insert into public.held values (2)`.execute(trx);
    }),
  );
  // A statement that carries BEGIN where no transaction was begun would leave one open for good.
  await assert.rejects(
    withConnection(t.db, (conn) =>
      sql`${sql.raw('begin; insert into public.held values (3)')}`.execute(conn),
    ),
    /carries BEGIN runs only first in a transaction/,
  );
  // The last statement carrying COMMIT: committed once, and a failure after it rolls nothing back.
  await assert.rejects(
    withConnection(t.db, (conn) =>
      conn.transaction().execute(async (trx) => {
        await sql`${sql.raw('begin; insert into public.held values (4)')}`.execute(trx);
        await sql`${sql.raw('insert into public.held values (5); commit')}`.execute(trx);
        throw new Error('after the commit');
      }),
    ),
    /after the commit/,
  );
  const rows = await sql<{ n: number }>`select n from public.held order by n`.execute(t.db);
  assert.deepEqual(
    rows.rows.map((r) => r.n),
    [2, 4, 5],
  );
});

// Odd values written as literals, handlers that misuse the window transaction, connections killed
// mid-window, races. On a database of their own.
describe('odd values, handlers that misuse the window transaction, connections killed mid-window, races', () => {
  const HOUR = 3_600_000;
  const T0 = Date.parse('2026-03-01T00:00:00Z');
  const policy = windowPolicy(1, 30_000);
  let t: TestDb;

  before(async () => {
    t = await createTestDb();
    await sql`create table public.hostile (k text primary key, v text)`.execute(t.db);
  });
  after(async () => t?.drop());

  // The trigger is any string: the odd-values test stores ones no real trigger is.
  const windowOf = (job: string, i: number, trigger = 'manual', generation = 0) =>
    hourlyWindow(job, T0, i, policy, trigger as WindowInput['trigger'], generation);
  const jobOf = (name: string, handler: JobSpec['handler']) => hourlyJob(name, T0, handler);
  const activities = (jobs: JobSpec[]) => directActivities(t.db, jobs);

  const count = async (table: string, where = sql`true`) =>
    (await sql<{ n: number }>`select count(*)::int n from ${sql.table(table)} where ${where}`.execute(t.db))
      .rows[0]!.n;

  const markerOf = async (job: string, i: number, generation = 0) =>
    await t.db
      .selectFrom('job_windows')
      .selectAll()
      .where('job', '=', job)
      .where('window_start', '=', new Date(T0 + i * HOUR))
      .where('generation', '=', generation)
      .executeTakeFirst();

  const idleInTransaction = async () =>
    (
      await sql<{ n: number }>`select count(*)::int n from pg_stat_activity
      where datname = current_database() and state like 'idle in transaction%'`.execute(t.db)
    ).rows[0]!.n;

  const ODD = [
    "it's",
    'back\\slash',
    "\\'; drop table public.hostile; --",
    "E'\\x00'",
    '$$ dollar $$',
    'ünï 🌊 \u2028',
    'x'.repeat(5000),
    'null',
  ];

  test('odd workflow ids, triggers and details are stored as they are (literal())', async () => {
    const job = 'odd-values';
    const details = { note: "it's \\ 'quoted'", nested: { deep: [1, 'two', null] }, uni: 'ünï 🌊' };
    const acts = activities([jobOf(job, async () => ({ input: 0, applied: 0, quarantined: 0, details }))]);
    await watermarkOf(t.db, job, new Date(T0));
    for (const [i, odd] of ODD.entries()) {
      const env = new MockActivityEnvironment({
        attempt: 1,
        workflowExecution: { workflowId: odd, runId: 'r' },
      } as ConstructorParameters<typeof MockActivityEnvironment>[0]);
      const r = (await env.run(acts.processWindow, windowOf(job, i, odd))) as WindowResult;
      assert.equal(r.outcome, 'processed', odd);
      const m = await markerOf(job, i);
      assert.equal(m?.workflow_id, odd);
      assert.equal(m?.trigger, odd);
      const run = await t.db
        .selectFrom('job_runs')
        .select(['workflow_id', 'details'])
        .where('job', '=', job)
        .where('window_start', '=', new Date(T0 + i * HOUR))
        .where('outcome', '=', 'processed')
        .executeTakeFirstOrThrow();
      assert.equal(run.workflow_id, odd);
      assert.deepEqual(run.details, { input: 0, applied: 0, quarantined: 0, ...details });
    }
    assert.equal(await count('public.hostile'), 0);
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + ODD.length * HOUR);
  });

  test('claim and finish write odd job names and keys as literals', async () => {
    for (const job of ["o'k", 'b\\s', "'); drop table public.hostile; --"]) {
      const w = { job, start: new Date(T0), end: new Date(T0 + HOUR), generation: 0, key: `${job}\\'/k` };
      await watermarkOf(t.db, job, new Date(T0));
      const wm = await withConnection(t.db, (conn) =>
        conn.transaction().execute(async (trx) => {
          const a = await claimWindow(
            trx,
            w,
            { trigger: job, workflowId: job, at: new Date() },
            {
              lockTimeoutMs: 1000,
              idleTimeoutMs: 2000,
            },
          );
          assert.equal(a, 1);
          return await finishWindow(trx, w, {
            counts: { input: 1, applied: 1, quarantined: 0, details: { job } },
            startedAt: new Date(),
            finishedAt: new Date(),
            workflowId: job,
            attempt: 1,
          });
        }),
      );
      assert.equal(wm?.getTime(), T0 + HOUR, job);
      const m = await t.db
        .selectFrom('job_windows')
        .selectAll()
        .where('job', '=', job)
        .executeTakeFirstOrThrow();
      assert.equal(m.window_key, w.key);
      assert.equal(m.status, 'done');
    }
    await sql`select 1 from public.hostile`.execute(t.db);
  });

  test("the window's transaction bounds do not stay on the pooled connection", async () => {
    const job = 'bounds';
    const acts = activities([
      jobOf(job, async (ctx) => {
        const r = await sql<{ l: string; i: string }>`select current_setting('lock_timeout') l,
        current_setting('idle_in_transaction_session_timeout') i`.execute(ctx.trx);
        assert.deepEqual(r.rows[0], { l: '30s', i: '65s' });
        return { input: 0, applied: 0, quarantined: 0 };
      }),
    ]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    for (let i = 0; i < 3; i++) {
      const r = await withConnection(t.db, (_c, client) =>
        client.query(`select current_setting('lock_timeout') l,
        current_setting('idle_in_transaction_session_timeout') i`),
      );
      assert.deepEqual(r.rows[0], { l: '0', i: '0' });
    }
  });

  test('a handler that swallows a statement error is not marked done', async () => {
    const job = 'swallow';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`insert into public.hostile values (${'swallow'}, 'a')`.execute(ctx.trx);
        await sql`select 1/0`.execute(ctx.trx).catch(() => undefined);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    await assert.rejects(acts.processWindow(windowOf(job, 0)));
    assert.equal((await markerOf(job, 0))?.status, 'failed');
    assert.equal(await count('public.hostile', sql`k = 'swallow'`), 0);
    assert.equal(await idleInTransaction(), 0);
  });

  test('a handler that rolls the window transaction back through ctx.trx: the window is not reported processed', async () => {
    const job = 'rollback';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`rollback`.execute(ctx.trx).catch(() => undefined);
        await sql`insert into public.hostile values (${'after-rollback'}, 'b')`
          .execute(ctx.trx)
          .catch(() => undefined);
        await ctx
          .copyRows('public.hostile', ['k', 'v'], [['after-rollback-copy', 'b']])
          .catch(() => undefined);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    await assert.rejects(
      acts.processWindow(windowOf(job, 0)),
      /the handler tried to end the window's transaction \("rollback"\)/,
    );
    assert.equal((await markerOf(job, 0))?.status, 'failed');
    // Nothing the handler wrote after the rollback committed on its own.
    assert.equal(await count('public.hostile', sql`k like 'after-rollback%'`), 0);
    assert.equal(await count(`${SCHEMA}.job_runs`, sql`job = ${job} and outcome = 'processed'`), 0);
    assert.equal(await idleInTransaction(), 0);
  });

  // The handler's own COMMIT is not sent (it would commit the claim, so the window's done marker,
  // and its writes before it, past taking back): the attempt fails loudly, and nothing commits.
  test('a handler that commits the window transaction early through ctx.trx fails loudly, nothing committed', async () => {
    const job = 'early-commit';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`commit`.execute(ctx.trx).catch(() => undefined);
        await sql`insert into public.hostile values (${'after-commit'}, 'c')`
          .execute(ctx.trx)
          .catch(() => undefined);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    await assert.rejects(
      acts.processWindow(windowOf(job, 0)),
      /the handler tried to end the window's transaction \("commit"\)/,
    );
    assert.equal((await markerOf(job, 0))?.status, 'failed');
    assert.equal(await count('public.hostile', sql`k = 'after-commit'`), 0);
    assert.equal(await count(`${SCHEMA}.job_runs`, sql`job = ${job} and outcome = 'processed'`), 0);
    assert.equal(await idleInTransaction(), 0);
  });

  test('a handler whose statement carries its own COMMIT: nothing after it is sent', async () => {
    const job = 'carried-commit';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`${sql.raw("insert into public.hostile values ('carried-1', 'c'); commit")}`.execute(
          ctx.trx,
        );
        await sql`insert into public.hostile values (${'carried-2'}, 'c')`
          .execute(ctx.trx)
          .catch(() => undefined);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    await assert.rejects(acts.processWindow(windowOf(job, 0)), /"commit" would end the window's transaction/);
    assert.equal((await markerOf(job, 0))?.status, 'failed');
    assert.equal(
      await count('public.hostile', sql`k like 'carried-%'`),
      0,
      'not even the statement carrying it',
    );
    assert.equal(await count(`${SCHEMA}.job_runs`, sql`job = ${job} and outcome = 'processed'`), 0);
    assert.equal(await idleInTransaction(), 0);
  });

  test('savepoints inside the window transaction still work (rollback to savepoint is not its end)', async () => {
    const job = 'savepoint';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`insert into public.hostile values (${'sp-1'}, 's')`.execute(ctx.trx);
        await sql`savepoint s`.execute(ctx.trx);
        await sql`insert into public.hostile values (${'sp-1'}, 'dup')`
          .execute(ctx.trx)
          .catch(() => undefined);
        await sql`rollback to savepoint s`.execute(ctx.trx);
        await sql`release savepoint s`.execute(ctx.trx);
        await sql`insert into public.hostile values (${'sp-2'}, 's')`.execute(ctx.trx);
        return { input: 2, applied: 2, quarantined: 0 };
      }),
    ]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    assert.equal(await count('public.hostile', sql`k like 'sp-%'`), 2);
  });

  test("ctx.copyRows kept past the handler's return copies nothing outside the window", async () => {
    const job = 'stale-copy';
    let stash: ((rows: unknown[][]) => Promise<number>) | undefined;
    const acts = activities([
      jobOf(job, async (ctx) => {
        stash = (rows) => ctx.copyRows('public.hostile', ['k', 'v'], rows);
        return { input: 0, applied: 0, quarantined: 0 };
      }),
    ]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    await assert.rejects(stash!([['stale', 'x']]), /outside/);
    assert.equal(await count('public.hostile', sql`k = 'stale'`), 0);
  });

  test('a handler that sends begin, or runs trx.transaction(): nothing leaks', async () => {
    const job = 'begin';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`begin`.execute(ctx.trx);
        await sql`insert into public.hostile values (${'begin-' + ctx.window.start.getTime()}, 'd')`.execute(
          ctx.trx,
        );
        if (ctx.window.start.getTime() === T0 + HOUR) {
          await (ctx.trx as unknown as { transaction(): { execute(f: () => Promise<void>): Promise<void> } })
            .transaction()
            .execute(async () => undefined);
        }
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    await assert.rejects(acts.processWindow(windowOf(job, 1)));
    assert.equal(await count('public.hostile', sql`k like 'begin-%'`), 1);
    assert.equal(await idleInTransaction(), 0);
  });

  test('a handler that sets a session setting is refused: it would outlast the window on the pooled connection', async () => {
    const job = 'session-set';
    const current = () =>
      withConnection(t.db, (_c, client) =>
        client.query(`select current_setting('statement_timeout') s, current_setting('TimeZone') z,
        current_user u, current_setting('search_path') p`),
      );
    const before = (await current()).rows[0];
    const settings = [
      'set statement_timeout = 1',
      'SET SESSION search_path TO nowhere',
      'set role postgres',
      'set session authorization default',
      "  Set time zone 'Pacific/Chatham'",
    ];
    for (const [i, text] of settings.entries()) {
      const acts = activities([
        jobOf(job, async (ctx) => {
          await sql`insert into public.hostile values (${`session-${i}`}, 'e')`.execute(ctx.trx);
          await sql.raw(text).execute(ctx.trx);
          return { input: 1, applied: 1, quarantined: 0 };
        }),
      ]);
      await assert.rejects(acts.processWindow(windowOf(job, i)), /SET LOCAL/, text);
    }
    // SET LOCAL ends with the window's transaction: allowed.
    const local = activities([
      jobOf(job, async (ctx) => {
        await sql`set local statement_timeout = 5000`.execute(ctx.trx);
        await sql`insert into public.hostile values (${'session-local'}, 'e')`.execute(ctx.trx);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    assert.equal((await local.processWindow(windowOf(job, settings.length))).outcome, 'processed');
    assert.equal(await count('public.hostile', sql`k like 'session-%'`), 1);
    for (let i = 0; i < 3; i++) assert.deepEqual((await current()).rows[0], before);
  });

  test("a handler's statement running past the attempt's timeout is cancelled by the server, not left running", async () => {
    const job = 'runaway';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`insert into public.hostile values (${'runaway'}, 'f')`.execute(ctx.trx);
        await sql`select pg_sleep(20)`.execute(ctx.trx);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    // The attempt's timeout is 1.5 s: a retry would otherwise wait behind this one's lock for 20 s.
    await assert.rejects(
      acts.processWindow({ ...windowOf(job, 0), policy: windowPolicy(1, 1_500) }),
      /statement timeout/,
    );
    assert.equal(await count('public.hostile', sql`k = 'runaway'`), 0);
    assert.equal((await markerOf(job, 0))?.status, 'failed');
  });

  test('a handler that does not await its statements: they commit with the window or the window fails', async () => {
    const job = 'unawaited';
    const acts = activities([
      jobOf(job, async (ctx) => {
        const k = `unawaited-${ctx.window.start.getTime()}`;
        void sql`select pg_sleep(0.2); `.execute(ctx.trx).catch(() => undefined);
        void sql`insert into public.hostile values (${k}, 'e')`.execute(ctx.trx).catch(() => undefined);
        void ctx.copyRows('public.hostile', ['k', 'v'], [[`${k}-copy`, 'f']]).catch(() => undefined);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    assert.equal(await count('public.hostile', sql`k like 'unawaited-%'`), 2);
    assert.equal(await idleInTransaction(), 0);
  });

  test('copyRows with 0 rows, huge rows, Buffers, bigints, NaN, nested objects; after an error it fails the window', async () => {
    await sql`create table public.odd_rows (k text, b bytea, big bigint, f float8, doc jsonb)`.execute(t.db);
    const job = 'copy-odd';
    const huge = 'h\t\n\\'.repeat(300_000);
    const acts = activities([
      jobOf(job, async (ctx) => {
        const i = (ctx.window.start.getTime() - T0) / HOUR;
        if (i === 0) {
          const zero = await ctx.copyRows('public.odd_rows', ['k'], []);
          const n = await ctx.copyRows(
            'public.odd_rows',
            ['k', 'b', 'big', 'f', 'doc'],
            [
              [huge, Buffer.from([0, 1, 92, 10, 255]), 2n ** 62n, Number.NaN, { a: { b: [1, '\\', '\n'] } }],
              ['inf', new Uint8Array([]), -(2n ** 63n), Number.POSITIVE_INFINITY, []],
            ],
          );
          return { input: zero + n, applied: zero + n, quarantined: 0 };
        }
        await sql`select 1/0`.execute(ctx.trx).catch(() => undefined);
        const n = await ctx.copyRows('public.odd_rows', ['k'], [['after-error']]).catch(() => 0);
        return { input: n, applied: n, quarantined: 0 };
      }),
    ]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    const rows = await sql<{ k: string; b: Buffer; big: string; f: number; doc: unknown }>`
    select k, b, big::text big, f, doc from public.odd_rows order by k`.execute(t.db);
    assert.equal(rows.rows.length, 2);
    assert.equal(rows.rows[0]!.k, huge);
    assert.deepEqual([...rows.rows[0]!.b], [0, 1, 92, 10, 255]);
    assert.equal(rows.rows[0]!.big, String(2n ** 62n));
    assert.ok(Number.isNaN(rows.rows[0]!.f));
    assert.deepEqual(rows.rows[0]!.doc, { a: { b: [1, '\\', '\n'] } });
    assert.equal(rows.rows[1]!.big, String(-(2n ** 63n)));
    assert.equal(rows.rows[1]!.f, Number.POSITIVE_INFINITY);
    await assert.rejects(acts.processWindow(windowOf(job, 1)));
    assert.equal(await count('public.odd_rows', sql`k = 'after-error'`), 0);
    assert.equal((await markerOf(job, 1))?.status, 'failed');
  });

  test('ten attempts of one window at once: one processes it, the rest find it done', async () => {
    const job = 'stampede';
    let runs = 0;
    const acts = activities([
      jobOf(job, async (ctx) => {
        runs++;
        await sql`select pg_sleep(0.05)`.execute(ctx.trx);
        await sql`insert into public.hostile values (${'stampede'}, 'g')`.execute(ctx.trx);
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    await watermarkOf(t.db, job, new Date(T0));
    const results = await Promise.all(Array.from({ length: 10 }, () => acts.processWindow(windowOf(job, 0))));
    assert.equal(results.filter((r) => r.outcome === 'processed').length, 1);
    assert.equal(results.filter((r) => r.outcome === 'already-done').length, 9);
    assert.equal(runs, 1);
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + HOUR);
  });

  test('a failed window among done ones committing at once: the watermark stops at it; a rerun leaves it', async () => {
    const job = 'gap';
    let failedOnce = 0;
    const acts = activities([
      jobOf(job, async (ctx) => {
        const i = (ctx.window.start.getTime() - T0) / HOUR;
        await sql`select pg_sleep(${(10 - i) * 0.01})`.execute(ctx.trx);
        if (i === 4 && ctx.generation === 0 && !failedOnce++) throw new Error('window 4 fails');
        return { input: 0, applied: 0, quarantined: 0 };
      }),
    ]);
    await watermarkOf(t.db, job, new Date(T0));
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => acts.processWindow(windowOf(job, i))),
    );
    assert.equal(results.filter((r) => r.status === 'rejected').length, 1);
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + 4 * HOUR);
    // A rerun (generation 1) of a done window and of the failed one moves nothing.
    for (const i of [2, 4]) {
      const r = await acts.processWindow({
        ...windowOf(job, i, 'manual', 1),
        key: `${job}/${isoUtc(new Date(T0 + i * HOUR))}#1`,
      });
      assert.equal(r.outcome, 'processed');
    }
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + 4 * HOUR);
    assert.equal((await markerOf(job, 4))?.status, 'failed');
    assert.equal((await acts.processWindow(windowOf(job, 4))).outcome, 'processed');
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + 10 * HOUR);
  });

  /** Terminates the backend of the window's own connection from another connection. */
  const killOwn = async (trx: Parameters<JobSpec['handler']>[0]['trx']) => {
    const pid = (await sql<{ pid: number }>`select pg_backend_pid() pid`.execute(trx)).rows[0]!.pid;
    await sql`select pg_terminate_backend(${pid})`.execute(t.db);
    return pid;
  };

  test('the connection killed between claim and finish, during COPY, during the finish: nothing committed, the pool works', async () => {
    const job = 'killed';
    let mode = '';
    const acts = activities([
      jobOf(job, async (ctx) => {
        await sql`insert into public.hostile values (${`killed-${mode}-${ctx.window.start.getTime()}`}, 'k')`.execute(
          ctx.trx,
        );
        if (mode === 'handler') await killOwn(ctx.trx);
        if (mode === 'copy') {
          const pid = (await sql<{ pid: number }>`select pg_backend_pid() pid`.execute(ctx.trx)).rows[0]!.pid;
          function* rows() {
            for (let i = 0; i < 200_000; i++) {
              if (i === 1000) void sql`select pg_terminate_backend(${pid})`.execute(t.db);
              yield [`killed-copy-${i}`, 'x'.repeat(100)];
            }
          }
          await ctx.copyRows('public.hostile', ['k', 'v'], rows());
        }
        if (mode === 'finish') {
          // The finish waits on the job's watermark row; the connection dies while it waits.
          const pid = (await sql<{ pid: number }>`select pg_backend_pid() pid`.execute(ctx.trx)).rows[0]!.pid;
          void (async () => {
            for (;;) {
              const w = await sql<{ n: number }>`select count(*)::int n from pg_stat_activity
              where pid = ${pid} and wait_event_type = 'Lock'`.execute(t.db);
              if (w.rows[0]!.n > 0) break;
              await new Promise((r) => setTimeout(r, 10));
            }
            await sql`select pg_terminate_backend(${pid})`.execute(t.db);
          })();
        }
        return { input: 1, applied: 1, quarantined: 0 };
      }),
    ]);
    await watermarkOf(t.db, job, new Date(T0));
    for (const [i, m] of ['handler', 'copy', 'finish'].entries()) {
      mode = m;
      if (m === 'finish') {
        await withConnection(t.db, (conn) =>
          conn.transaction().execute(async (trx) => {
            await sql`select 1 from ${tm.job_watermarks} where job = ${job} for update`.execute(trx);
            const p = acts.processWindow(windowOf(job, i));
            await assert.rejects(p, m);
          }),
        );
      } else {
        await assert.rejects(acts.processWindow(windowOf(job, i)), m);
      }
      assert.equal((await markerOf(job, i))?.status, 'failed', m);
      assert.equal(await count('public.hostile', sql`k like ${`killed-${m}%`}`), 0, m);
      assert.equal(await idleInTransaction(), 0, m);
    }
    mode = 'none';
    assert.equal((await acts.processWindow(windowOf(job, 5))).outcome, 'processed');
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
  });

  test('an idle pooled connection killed before the claim: the window fails at worst once, the pool recovers', async () => {
    const job = 'killed-idle';
    const acts = activities([jobOf(job, async () => ({ input: 0, applied: 0, quarantined: 0 }))]);
    assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
    await sql`select pg_terminate_backend(pid) from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and state = 'idle'`.execute(t.db);
    const r = await acts.processWindow(windowOf(job, 1)).catch((e: Error) => e);
    if (r instanceof Error) assert.equal((await acts.processWindow(windowOf(job, 1))).outcome, 'processed');
    assert.equal((await acts.processWindow(windowOf(job, 2))).outcome, 'processed');
  });

  test('a long attempt timeout (13 days): the transaction bounds stay within what PostgreSQL accepts', async () => {
    const job = 'long-attempt';
    const acts = activities([
      jobOf(job, async (ctx) => {
        const r = await sql<{ l: string; i: string }>`select current_setting('lock_timeout') l,
        current_setting('idle_in_transaction_session_timeout') i`.execute(ctx.trx);
        assert.equal(r.rows[0]!.l, '13d');
        assert.equal(r.rows[0]!.i, '2147483647ms');
        return { input: 0, applied: 0, quarantined: 0 };
      }),
    ]);
    const input = windowOf(job, 0);
    const r = await acts.processWindow({
      ...input,
      policy: { ...policy, startToCloseTimeoutMs: 13 * 24 * HOUR },
    });
    assert.equal(r.outcome, 'processed');
  });

  test('incidents raised at once, as many as the pool has connections: none waits on the pool for ever', async () => {
    // Each raise holds a connection for its transaction (issue 9): a second one taken inside it
    // would leave them all waiting on each other once they hold every connection of the pool.
    const small = createDb(t.url, { max: 2 });
    const acts = directActivities(small, [
      jobOf('raised', async () => ({ input: 0, applied: 0, quarantined: 0 })),
    ]);
    const raised = Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        acts.raiseIncident({ job: 'raised', subject: `raised/${i}`, kind: 'window-failed', error: 'x' }),
      ),
    );
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<'stuck'>((r) => (timer = setTimeout(() => r('stuck'), 10_000)));
    const r = await Promise.race([raised, stuck]);
    clearTimeout(timer);
    assert.notEqual(r, 'stuck', 'the raises hold every connection and wait for one more');
    assert.equal(await count(`${SCHEMA}.incidents`, sql`job = 'raised' and closed_at is null`), 4);
    await small.destroy();
  });

  test('a value the server refuses early in a long COPY fails the window promptly; the pool works after', async () => {
    await sql`create table public.copy_typed (k text, n integer)`.execute(t.db);
    const job = 'copy-refused';
    const acts = activities([
      jobOf(job, async (ctx) => {
        function* rows() {
          for (let i = 0; i < 300_000; i++) yield [`r${i}-${'p'.repeat(200)}`, i === 5 ? 'not a number' : i];
        }
        const n = await ctx.copyRows('public.copy_typed', ['k', 'n'], rows());
        return { input: n, applied: n, quarantined: 0 };
      }),
    ]);
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<'stuck'>((r) => (timer = setTimeout(() => r('stuck'), 30_000)));
    const r = await Promise.race([acts.processWindow(windowOf(job, 0)).catch((e: Error) => e), stuck]);
    clearTimeout(timer);
    assert.ok(r instanceof Error, `expected a failure, got ${String(r)} after ${Date.now() - started} ms`);
    assert.match(r.message, /invalid input syntax for type integer/);
    assert.equal(await count('public.copy_typed'), 0);
    assert.equal(await idleInTransaction(), 0);
  });

  test('thirty windows, some failing, committing while ticks advance the watermark: it ends at the done prefix', async () => {
    const job = 'churn';
    const failing = new Set([7, 13, 14, 22]);
    const acts = activities([
      jobOf(job, async (ctx) => {
        const i = (ctx.window.start.getTime() - T0) / HOUR;
        await sql`select pg_sleep(${Math.random() * 0.03})`.execute(ctx.trx);
        if (failing.has(i)) throw new Error(`window ${i} fails`);
        return { input: 0, applied: 0, quarantined: 0 };
      }),
    ]);
    let ticking = true;
    const ticks = (async () => {
      while (ticking) await watermarkOf(t.db, job, new Date(T0));
    })();
    await Promise.allSettled(Array.from({ length: 30 }, (_, i) => acts.processWindow(windowOf(job, i))));
    ticking = false;
    await ticks;
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + 7 * HOUR);
    failing.clear();
    ticking = true;
    const ticks2 = (async () => {
      while (ticking) await watermarkOf(t.db, job, new Date(T0));
    })();
    await Promise.all([22, 14, 7, 13].map((i) => acts.processWindow(windowOf(job, i))));
    ticking = false;
    await ticks2;
    assert.equal((await readWatermark(t.db, job))?.getTime(), T0 + 30 * HOUR);
  });
});
