// tidemark in a business database that has tables of its own, some named as tidemark's and the demo's
// were (orders, effects, incidents, backups, quarantine, jobs) and one with a trigger: migrating
// creates tidemark's objects in its own schema only, leaves public as it was, and a job of the user's
// writes to the user's table. A catalog's own migrations create and evolve the user's tables.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { sql, type Generated } from 'kysely';
import { createDb, dropPublicCompat, migrateAll, migrateCatalog } from '../../../db/database.js';
import type { WindowResult } from '../../../contract/workflows.js';
import { defineCatalog, defineJob } from '../../../schedules/define.js';
import { createTestDb, SCHEMA, type TestDb } from '../../helpers/db.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../../helpers/windows.js';

let t: TestDb;
const T0 = Date.parse('2026-11-02T00:00:00Z');

/** The shop's own schema in public, as a business database has it before tidemark arrives. */
const SHOP = sql`
  create table public.orders (id serial primary key, customer text not null, total_cents bigint not null,
                              placed_at timestamptz not null);
  create table public.effects (id serial primary key, what text);
  create table public.incidents (id serial primary key, opened_at timestamptz default now());
  create table public.backups (name text primary key);
  create table public.quarantine (item text);
  create table public.jobs (id bigserial primary key, kind text not null, payload jsonb);
  create table public.order_totals (hour timestamptz primary key, orders integer not null, cents bigint not null);
  create table public.order_audit (order_id integer, at timestamptz default now());
  create function public.audit_order() returns trigger language plpgsql as $$
    begin insert into public.order_audit (order_id) values (new.id); return new; end $$;
  create trigger orders_audit after insert on public.orders for each row execute function public.audit_order();
  insert into public.orders (customer, total_cents, placed_at) values
    ('ada', 1250, '2026-11-02T00:10:00Z'), ('bob', 800, '2026-11-02T00:40:00Z'), ('cy', 99, '2026-11-02T01:05:00Z');
  insert into public.jobs (kind) values ('their own job queue');
`;

/** pg_dump of the public schema (objects and rows), as text. */
async function dumpPublic(url: string): Promise<string> {
  const { stdout } = await promisify(execFile)(
    'pg_dump',
    ['--schema=public', '--no-owner', `--dbname=${url}`],
    {
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  // pg_dump 15.x prints a random \restrict key per run.
  return stdout.replace(/^\\(un)?restrict .*$/gm, '');
}

before(async () => {
  t = await createTestDb({ migrated: false });
  await SHOP.execute(t.db);
});
after(async () => {
  await t?.drop();
});

test("migrating a business database with tables named as tidemark's leaves public as it was", async () => {
  const before = await dumpPublic(t.url);
  await migrateAll(t.db, {});
  assert.equal(await dumpPublic(t.url), before);
  const schemas = await sql<{ nspname: string }>`select nspname from pg_namespace
    where not starts_with(nspname, 'pg_') and nspname <> 'information_schema' order by 1`.execute(t.db);
  assert.deepEqual(
    schemas.rows.map((r) => r.nspname),
    ['public', SCHEMA],
  );
  // The ledger's own tables are in its schema, the demo's nowhere.
  const ledgerTables = await sql<{ relname: string }>`select c.relname from pg_class c
    join pg_namespace n on n.oid = c.relnamespace where n.nspname = ${SCHEMA} and c.relkind = 'r'`.execute(
    t.db,
  );
  const names = ledgerTables.rows.map((r) => r.relname);
  for (const table of ['job_windows', 'effects', 'incidents', 'backups', 'quarantine'])
    assert.ok(names.includes(table), table);
  for (const demo of ['orders', 'daily_sales', 'price_updates', 'sales_window_totals'])
    assert.ok(!names.includes(demo), demo);
});

test("a user's job reads the user's orders and writes the user's table, its window recorded in tidemark's schema", async () => {
  await migrateAll(t.db, {});
  const job = hourlyJob('order-totals', T0, async (ctx) => {
    const r = await sql<{ n: number }>`
      insert into public.order_totals (hour, orders, cents)
      select ${ctx.window.start}, count(*), coalesce(sum(total_cents), 0) from public.orders
       where placed_at >= ${ctx.window.start} and placed_at < ${ctx.window.end}
      on conflict (hour) do update set orders = excluded.orders, cents = excluded.cents
      returning orders as n`.execute(ctx.trx);
    const n = r.rows[0]!.n;
    return { input: n, applied: n, quarantined: 0 };
  });
  const acts = directActivities(t.db, [job]);
  const run = (i: number) =>
    acts.processWindow(hourlyWindow('order-totals', T0, i, windowPolicy(1, 30_000))) as Promise<WindowResult>;
  assert.equal((await run(0)).outcome, 'processed');
  assert.equal((await run(1)).outcome, 'processed');
  assert.equal((await run(0)).outcome, 'already-done');
  const totals = await sql<{
    orders: number;
    cents: string;
  }>`select orders, cents::text from public.order_totals
    order by hour`.execute(t.db);
  assert.deepEqual(totals.rows, [
    { orders: 2, cents: '2050' },
    { orders: 1, cents: '99' },
  ]);
  const marked = await t.db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', 'order-totals')
    .execute();
  assert.deepEqual(
    marked.map((m) => m.status),
    ['done', 'done'],
  );
  // The shop's trigger still fires, and its own `jobs` table is untouched.
  await sql`insert into public.orders (customer, total_cents, placed_at) values ('dee', 5, now())`.execute(
    t.db,
  );
  const audit = await sql<{ n: number }>`select count(*)::int as n from public.order_audit`.execute(t.db);
  assert.equal(audit.rows[0]!.n, 4);
  const jobs = await sql<{ kind: string }>`select kind from public.jobs`.execute(t.db);
  assert.deepEqual(jobs.rows, [{ kind: 'their own job queue' }]);
});

test("a handler's builder names resolve as the user's connection resolves them, never into tidemark's schema; quarantine is tidemark's", async () => {
  await migrateAll(t.db, {});
  // The user's role resolves bare names in public (the test database's own search_path is empty).
  const db = createDb(`${t.url}?options=${encodeURIComponent('-c search_path=public')}`, { max: 2 });
  try {
    interface ShopDb {
      effects: { id: Generated<number>; what: string | null };
    }
    const job = defineJob<ShopDb>({
      name: 'shop-effects',
      grid: '1h',
      start: '2026-11-02T00:00:00Z',
      handler: async (ctx) => {
        await ctx.trx
          .insertInto('effects')
          .values({ what: `window ${ctx.key}` })
          .execute();
        const set = await ctx.quarantine([{ key: 'order-7', reason: 'no customer', payload: { id: 7 } }]);
        return { input: 1 + set, applied: 1, quarantined: set };
      },
    });
    const acts = directActivities(db, [job]);
    const r = (await acts.processWindow(
      hourlyWindow('shop-effects', T0, 0, windowPolicy(1, 30_000)),
    )) as WindowResult;
    assert.equal(r.outcome, 'processed');
    const mine = await sql<{ what: string }>`select what from public.effects`.execute(t.db);
    assert.deepEqual(mine.rows, [{ what: 'window shop-effects/2026-11-02T00:00:00Z' }]);
    const theirs = await t.db
      .selectFrom('effects')
      .select('effect_key')
      .where('job', '=', 'shop-effects')
      .execute();
    assert.deepEqual(theirs, []);
    const set = await t.db
      .selectFrom('quarantine')
      .select(['record_key', 'reason', 'generation'])
      .where('job', '=', 'shop-effects')
      .execute();
    assert.deepEqual(set, [{ record_key: 'order-7', reason: 'no customer', generation: 0 }]);
  } finally {
    await db.destroy();
  }
});

test("a job's prepare and settle steps reach the user's tables by their names, and the ledger as ctx.ledger", async () => {
  await migrateAll(t.db, {});
  const db = createDb(`${t.url}?options=${encodeURIComponent('-c search_path=public')}`, { max: 2 });
  try {
    interface ShopDb {
      jobs: { id: Generated<number>; kind: string; payload: unknown };
    }
    const job = defineJob<ShopDb>({
      name: 'shop-steps',
      grid: '1h',
      start: '2026-11-02T00:00:00Z',
      prepare: async (ctx) => {
        await ctx.db
          .insertInto('jobs')
          .values({ kind: `prepared ${ctx.key}`, payload: null })
          .execute();
        const windows = await ctx.ledger
          .selectFrom('job_windows')
          .select('status')
          .where('job', '=', 'shop-steps')
          .execute();
        assert.deepEqual(windows, [], 'the ledger, before the window commits');
      },
      handler: async () => ({ input: 0, applied: 0, quarantined: 0 }),
      settle: async (ctx) => {
        await ctx.db
          .insertInto('jobs')
          .values({ kind: `settled ${ctx.key}`, payload: null })
          .execute();
      },
    });
    const acts = directActivities(db, [job]);
    const w = hourlyWindow('shop-steps', T0, 0, windowPolicy(1, 30_000));
    assert.equal(((await acts.processWindow(w)) as WindowResult).outcome, 'processed');
    await acts.settleWindow(w);
    const rows = await sql<{
      kind: string;
    }>`select kind from public.jobs where kind like '%shop-steps%' order by id`.execute(t.db);
    assert.deepEqual(
      rows.rows.map((r) => r.kind),
      ['prepared shop-steps/2026-11-02T00:00:00Z', 'settled shop-steps/2026-11-02T00:00:00Z'],
    );
  } finally {
    await db.destroy();
  }
});

test("a catalog's migrations run in name order, once each, on the user's names; a failing one is named and undone", async () => {
  await migrateAll(t.db, {});
  const ran: string[] = [];
  const catalog = defineCatalog([], {
    migrations: {
      '2026-12-02_notes_column': {
        up: async (db) => {
          ran.push('notes');
          await sql`alter table public.order_totals add column note text`.execute(db);
        },
      },
      '2026-12-01_refunds': {
        up: async (db) => {
          ran.push('refunds');
          await sql`create table public.refunds (order_id integer primary key, cents bigint not null)`.execute(
            db,
          );
        },
      },
    },
  });
  assert.deepEqual(await migrateCatalog(t.db, catalog.migrations), [
    '2026-12-01_refunds',
    '2026-12-02_notes_column',
  ]);
  assert.deepEqual(ran, ['refunds', 'notes']);
  assert.deepEqual(await migrateCatalog(t.db, catalog.migrations), []);
  const recorded = await sql<{
    name: string;
  }>`select name from ${sql.id(SCHEMA, 'catalog_migration')} order by name`.execute(t.db);
  assert.deepEqual(
    recorded.rows.map((r) => r.name),
    ['2026-12-01_refunds', '2026-12-02_notes_column'],
  );
  // A failing migration: named in the error, its statements rolled back, recorded as not run.
  const failing = {
    ...catalog.migrations,
    '2026-12-03_bad': {
      up: async (db: Parameters<(typeof catalog.migrations)[string]['up']>[0]) => {
        await sql`create table public.half_made (id int)`.execute(db);
        await sql`alter table public.no_such_table add column x int`.execute(db);
      },
    },
  };
  await assert.rejects(
    migrateCatalog(t.db, failing),
    /catalog migration 2026-12-03_bad failed: .*no_such_table/,
  );
  const half = await sql<{ t: string | null }>`select to_regclass('public.half_made')::text as t`.execute(
    t.db,
  );
  assert.equal(half.rows[0]!.t, null);
});

test('a catalog migration without up(), or with a name that does not sort, is refused when the catalog is defined', () => {
  assert.throws(
    () => defineCatalog([], { migrations: { '2026-12-01_x': {} as never } }),
    /migrations\.2026-12-01_x: has no up\(db\) function/,
  );
  assert.throws(
    () => defineCatalog([], { migrations: { '../x': { up: async () => undefined } } }),
    /migrations\.\.\.\/x: a migration name is letters, digits/,
  );
});

test("dropping 0.1.0's compatibility objects never drops the user's own view or function of such a name", async () => {
  await migrateAll(t.db, {});
  await sql`create view public.job_windows as select 1 as x`.execute(t.db);
  await sql`create function public.tidemark_claim_window() returns int language sql as 'select 1'`.execute(
    t.db,
  );
  assert.deepEqual(await dropPublicCompat(t.db), []);
  const left = await sql<{
    v: string | null;
    f: string | null;
  }>`select to_regclass('public.job_windows')::text as v,
      to_regprocedure('public.tidemark_claim_window()')::text as f`.execute(t.db);
  assert.deepEqual(left.rows[0], { v: 'public.job_windows', f: 'public.tidemark_claim_window()' });
});

test("a schema whose kysely_migration is another application's is refused, nothing mixed into it", async () => {
  await sql`create schema app_own`.execute(t.db);
  await sql`create table app_own.kysely_migration (name varchar(255) primary key, timestamp varchar(255) not null)`.execute(
    t.db,
  );
  await sql`insert into app_own.kysely_migration values ('2024_01_users', '2024-01-01')`.execute(t.db);
  const db = createDb(t.url, { max: 1, schema: 'app_own' });
  try {
    await assert.rejects(
      migrateAll(db, {}),
      /schema app_own already holds a kysely_migration table that is not tidemark's \(1 migrations of another application.*Set TIDEMARK_SCHEMA/,
    );
  } finally {
    await db.destroy();
  }
  const rows = await sql<{ name: string }>`select name from app_own.kysely_migration`.execute(t.db);
  assert.deepEqual(rows.rows, [{ name: '2024_01_users' }]);
});

test("a catalog migration renamed or removed after it ran is refused (it would run again); a newer catalog's is not", async () => {
  await migrateAll(t.db, {});
  const up = async () => undefined;
  // What the earlier test ran on this database, as the catalog still holds it.
  const prior = { '2026-12-01_refunds': { up }, '2026-12-02_notes_column': { up } };
  await migrateCatalog(t.db, { ...prior, '2026-12-10_a': { up }, '2026-12-11_b': { up } });
  await assert.rejects(
    migrateCatalog(t.db, { ...prior, '2026-12-10_a_renamed': { up }, '2026-12-11_b': { up } }),
    /catalog migration 2026-12-10_a ran on this database but is not in the catalog \(renamed or removed\?\)/,
  );
  // An older catalog (a worker not yet upgraded) lacks the newest one only: it starts.
  assert.deepEqual(await migrateCatalog(t.db, { ...prior, '2026-12-10_a': { up } }), []);
});
