// tidemark in a business database that has tables of its own, some named as tidemark's and the demo's
// were (orders, effects, incidents, backups, quarantine, jobs) and one with a trigger: migrating
// creates tidemark's objects in its own schema only, leaves public as it was, and a job of the user's
// writes to the user's table. A catalog's own migrations create and evolve the user's tables.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { sql, type Generated } from 'kysely';
import { createDb, migrateAll, migrateCatalog } from '../../../db/database.js';
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
