// The test helper the package exports for job authors (runWindowOnce): one window of their job on
// their database, as a worker runs it, and what it did; and the handler's abort signal.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { MockActivityEnvironment } from '@temporalio/testing';
import { runWindowOnce } from '../../../index.js';
import { windowActivities } from '../../../activities/window.js';
import { memoryLogger } from '../../../activities/logger.js';
import { defineCatalog, defineJob } from '../../../schedules/define.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { hourlyWindow, windowPolicy } from '../../helpers/windows.js';

let t: TestDb;
before(async () => {
  t = await createTestDb({ migrated: false });
  await sql`create table public.readings (id int primary key, taken_at timestamptz not null, value numeric)`.execute(
    t.db,
  );
  await sql`insert into public.readings values (1, '2026-10-05T10:10:00Z', 4), (2, '2026-10-05T10:20:00Z', null),
    (3, '2026-10-05T10:50:00Z', 6)`.execute(t.db);
});
after(async () => {
  await t?.drop();
});

const catalog = defineCatalog(
  [
    defineJob({
      name: 'reading-sums',
      grid: '1h',
      handler: async (ctx) => {
        const rows = await sql<{
          id: number;
          value: string | null;
        }>`select id, value::text from public.readings
          where taken_at >= ${ctx.window.start} and taken_at < ${ctx.window.end} order by id`.execute(
          ctx.trx,
        );
        const good = rows.rows.filter((r) => r.value !== null);
        const bad = rows.rows.filter((r) => r.value === null);
        const total = good.reduce((s, r) => s + Number(r.value), 0);
        await sql`insert into public.reading_sums (hour, total) values (${ctx.window.start}, ${total})`.execute(
          ctx.trx,
        );
        await ctx.quarantine(bad.map((r) => ({ key: `reading-${r.id}`, reason: 'no value', payload: r })));
        return {
          input: rows.rows.length,
          applied: good.length,
          quarantined: bad.length,
          effects: [
            {
              name: 'notify',
              channel: 'http' as const,
              request: {
                method: 'POST' as const,
                url: 'https://hooks.example.test/sums',
                body: { total },
                headers: { authorization: { secret: 'HOOK_TOKEN', prefix: 'Bearer ' } },
              },
            },
          ],
        };
      },
    }),
  ],
  {
    migrations: {
      '2026-12-01_reading_sums': {
        up: async (db) => {
          await sql`create table public.reading_sums (hour timestamptz primary key, total numeric not null)`.execute(
            db,
          );
        },
      },
    },
  },
);

test('runWindowOnce migrates, runs one window as a worker would, and reports its counts, effects and quarantine; again, already done', async () => {
  const run = () =>
    runWindowOnce({ databaseUrl: t.url, catalog, job: 'reading-sums', start: '2026-10-05T10:00:00Z' });
  const first = await run();
  assert.deepEqual(
    { outcome: first.outcome, key: first.key, window: first.window, counts: first.counts },
    {
      outcome: 'processed',
      key: 'reading-sums/2026-10-05T10:00:00Z',
      window: { start: '2026-10-05T10:00:00Z', end: '2026-10-05T11:00:00Z' },
      counts: { input: 3, applied: 2, quarantined: 1 },
    },
  );
  assert.deepEqual(first.effects, [
    {
      name: 'notify',
      channel: 'http',
      request: {
        method: 'POST',
        url: 'https://hooks.example.test/sums',
        body: { total: 10 },
        headers: { authorization: { secret: 'HOOK_TOKEN', prefix: 'Bearer ' } },
      },
      retry: null,
    },
  ]);
  assert.deepEqual(first.findings, []);
  assert.deepEqual(first.quarantined, [
    { key: 'reading-2', reason: 'no value', payload: { id: 2, value: null } },
  ]);
  assert.ok(first.log.some((l) => l.startsWith('PROCESSED job=reading-sums')));
  const sums = await sql<{ total: string }>`select total::text from public.reading_sums`.execute(t.db);
  assert.deepEqual(sums.rows, [{ total: '10' }]);
  const again = await run();
  assert.equal(again.outcome, 'already-done');
  assert.equal(
    (await sql<{ n: number }>`select count(*)::int as n from public.reading_sums`.execute(t.db)).rows[0]!.n,
    1,
  );
});

test('runWindowOnce refuses a start that is not a window start of the job, naming the window that holds it', async () => {
  await assert.rejects(
    runWindowOnce({ databaseUrl: t.url, catalog, job: 'reading-sums', start: '2026-10-05T10:30:00Z' }),
    /2026-10-05T10:30:00Z is not a window start of job "reading-sums" \(grid "1h" in UTC\); the window containing it starts at 2026-10-05T10:00:00Z/,
  );
});

test('runWindowOnce refuses a generation that is not a whole number from 0, or a schema that is not a plain name, before writing anything', async () => {
  const base = { databaseUrl: t.url, catalog, job: 'reading-sums', start: '2026-10-05T08:00:00Z' };
  await assert.rejects(
    runWindowOnce({ ...base, generation: -1 }),
    /runWindowOnce: generation must be a whole number from 0 \(got -1\)/,
  );
  await assert.rejects(
    runWindowOnce({ ...base, generation: 1.5 }),
    /generation must be a whole number from 0 \(got 1\.5\)/,
  );
  await assert.rejects(
    runWindowOnce({ ...base, schema: 'Tidemark' }),
    /schema: "Tidemark" is not a plain schema name/,
  );
  const n = await sql<{
    n: number;
  }>`select count(*)::int as n from public.reading_sums where hour = '2026-10-05T08:00:00Z'`.execute(t.db);
  assert.equal(n.rows[0]!.n, 0);
});

test("runWindowOnce reports the handler's findings and an effect's own retry policy", async () => {
  const found = defineCatalog([
    defineJob({
      name: 'finder',
      grid: '1h',
      handler: async () => ({
        input: 0,
        applied: 0,
        quarantined: 0,
        findings: [{ subject: 'totals', message: 'the shop says 12, we counted 10' }],
        effects: [
          {
            name: 'ping',
            channel: 'http' as const,
            request: { method: 'POST' as const, url: 'https://hooks.example.test/p', body: {} },
            retry: { maximumAttempts: 7 },
          },
        ],
      }),
    }),
  ]);
  const r = await runWindowOnce({
    databaseUrl: t.url,
    catalog: found,
    job: 'finder',
    start: '2026-10-05T10:00:00Z',
  });
  assert.deepEqual(r.findings, [
    { subject: 'finder/2026-10-05T10:00:00Z:totals', message: 'the shop says 12, we counted 10' },
  ]);
  assert.equal(r.effects[0]!.retry?.maximumAttempts, 7);
});

test("a handler's signal aborts when its attempt is cancelled: it stops, and nothing of the window commits", async () => {
  // The ledger in place (runWindowOnce migrates as it runs).
  await runWindowOnce({ databaseUrl: t.url, catalog, job: 'reading-sums', start: '2026-10-05T09:00:00Z' });
  let entered!: () => void;
  const inHandler = new Promise<void>((r) => (entered = r));
  let sawAbort = false;
  const slow = defineCatalog([
    defineJob({
      name: 'slow-fetch',
      grid: '1h',
      handler: async (ctx) => {
        await sql`insert into public.readings values (99, now(), 1)`.execute(ctx.trx);
        entered();
        await new Promise<void>((resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            sawAbort = true;
            reject(new Error('stopped: the attempt was cancelled'));
          });
          setTimeout(resolve, 60_000).unref();
        });
        return { input: 0, applied: 0, quarantined: 0 };
      },
    }),
  ]);
  const acts = windowActivities({ db: t.db, catalog: slow, logger: memoryLogger(), now: () => new Date() });
  const env = new MockActivityEnvironment();
  const run = env.run(
    acts.processWindow,
    hourlyWindow('slow-fetch', Date.parse('2026-10-05T00:00:00Z'), 0, windowPolicy(1, 120_000)),
  );
  await inHandler;
  env.cancel();
  await assert.rejects(run);
  assert.equal(sawAbort, true);
  const inserted = await sql<{
    n: number;
  }>`select count(*)::int as n from public.readings where id = 99`.execute(t.db);
  assert.equal(inserted.rows[0]!.n, 0);
  const marker = await t.db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', 'slow-fetch')
    .execute();
  assert.deepEqual(
    marker.map((m) => m.status),
    ['failed'],
  );
});
