// The ledger's cost per window and the handlers' bulk path: a processed window costs two round
// trips besides its handler's (six before); windows of one job committing at once still move the watermark
// over all of them; rows COPYed by a handler commit with the window's done marker, or not at all.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type pg from 'pg';
import { withConnection } from '../../db/connection.js';
import { poolOf } from '../../db/database.js';
import { readWatermark, watermarkOf } from '../../db/ledger.js';
import type { JobSpec } from '../../schedules/job.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../helpers/windows.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-01T00:00:00Z');
let t: TestDb;

before(async () => {
  t = await createTestDb();
  await sql`create table landed (k text primary key, note text, at timestamptz, doc jsonb, n numeric)`.execute(
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
  const sent: string[] = [];
  const pool = poolOf(t.db);
  const counting = (client: pg.PoolClient) => {
    const query = client.query;
    if ((query as { counted?: boolean }).counted) return;
    const wrapped = function (this: pg.PoolClient, ...args: unknown[]) {
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string })?.text;
      sent.push(String(text).trim().split(/\s+/).slice(0, 3).join(' '));
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof client.query;
    (wrapped as { counted?: boolean }).counted = true;
    client.query = wrapped;
  };
  pool.on('acquire', counting);
  try {
    const r = await acts.processWindow(windowOf(job, 1));
    assert.equal(r.outcome, 'processed');
  } finally {
    pool.off('acquire', counting);
  }
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
  assert.equal((await sql<{ n: number }>`select count(*)::int n from landed`.execute(t.db)).rows[0]!.n, 0);
  const r = await acts.processWindow(windowOf(job, 0));
  assert.equal(r.outcome, 'processed');
  assert.deepEqual(r.counts, { input: 3, applied: 3, quarantined: 0 });
  const rows = await sql<{ k: string; note: string | null; at: Date | null; doc: unknown; n: string | null }>`
    select k, note, at, doc, n::text as n from landed order by k`.execute(t.db);
  const want = [...awkward]
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))
    .map(([k, note, at, doc, n]) => ({ k, note, at: at ? new Date(at) : null, doc, n }));
  assert.deepEqual(rows.rows, want);
  assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'already-done');
  assert.equal((await sql<{ n: number }>`select count(*)::int n from landed`.execute(t.db)).rows[0]!.n, 3);
});

test('a row with the wrong number of values is refused by position; nothing is copied, the window is not done', async () => {
  const job = 'ragged';
  const acts = activities([
    jobOf(job, async (ctx) => {
      const rows = Array.from({ length: 5000 }, (_, i) => (i === 4321 ? [`r${i}`] : [`r${i}`, 'ok']));
      const n = await ctx.copyRows('landed', ['k', 'note'], rows);
      return { input: n, applied: n, quarantined: 0 };
    }),
  ]);
  await assert.rejects(acts.processWindow(windowOf(job, 0)), /row 4321 has 1 values for 2 columns/);
  assert.equal(
    (await sql<{ n: number }>`select count(*)::int n from landed where k like 'r%'`.execute(t.db)).rows[0]!.n,
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
  await sql`create table stock (sku text primary key, qty integer not null)`.execute(t.db);
  await sql`insert into stock values ('a', 1), ('b', 2)`.execute(t.db);
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
      await sql`insert into stock select sku, qty from stock_in
                on conflict (sku) do update set qty = excluded.qty`.execute(ctx.trx);
      return { input: n, applied: n, quarantined: 0 };
    }),
  ]);
  assert.equal((await acts.processWindow(windowOf(job, 0))).outcome, 'processed');
  const rows = await sql<{ sku: string; qty: number }>`select sku, qty from stock order by sku`.execute(t.db);
  assert.deepEqual(rows.rows, [
    { sku: 'a', qty: 1 },
    { sku: 'b', qty: 20 },
    { sku: 'c', qty: 30 },
  ]);
});

test('on a held connection a transaction is one whatever its first and last statements; a stray BEGIN is refused', async () => {
  await sql`create table held (n integer)`.execute(t.db);
  // No statement carries BEGIN or COMMIT: both are sent on their own, and a failure rolls back.
  await assert.rejects(
    withConnection(t.db, (conn) =>
      conn.transaction().execute(async (trx) => {
        await sql`insert into held values (1)`.execute(trx);
        throw new Error('handler failed');
      }),
    ),
    /handler failed/,
  );
  await withConnection(t.db, (conn) =>
    conn.transaction().execute(async (trx) => {
      await sql`insert into held values (2)`.execute(trx);
    }),
  );
  // A statement that carries BEGIN where no transaction was begun would leave one open for good.
  await assert.rejects(
    withConnection(t.db, (conn) => sql`${sql.raw('begin; insert into held values (3)')}`.execute(conn)),
    /carries BEGIN runs only first in a transaction/,
  );
  // The last statement carrying COMMIT: committed once, and a failure after it rolls nothing back.
  await assert.rejects(
    withConnection(t.db, (conn) =>
      conn.transaction().execute(async (trx) => {
        await sql`${sql.raw('begin; insert into held values (4)')}`.execute(trx);
        await sql`${sql.raw('insert into held values (5); commit')}`.execute(trx);
        throw new Error('after the commit');
      }),
    ),
    /after the commit/,
  );
  const rows = await sql<{ n: number }>`select n from held order by n`.execute(t.db);
  assert.deepEqual(
    rows.rows.map((r) => r.n),
    [2, 4, 5],
  );
});
