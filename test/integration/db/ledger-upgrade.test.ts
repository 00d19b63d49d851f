// The upgrade from release 0.1.0, whose ledger lay in public: the first migration of this release
// moves it into its own schema while a worker of 0.1.0 is in the middle of a window. That worker's
// statements name the tables in public (here: the window activity on a handle whose schema is
// public, as 0.1.0's search_path resolved them); they keep working through the views and wrappers
// the move leaves, no window is applied twice, and 0.1.0's migrator refuses to start afterwards
// instead of making a second ledger. Then the compatibility objects are dropped.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { Migrator } from 'kysely/migration';
import type { WindowResult } from '../../../contract/workflows.js';
import { createDb, dropPublicCompat, migrate, migrationPlan } from '../../../db/database.js';
import { shipped } from '../../../db/migrations/index.js';
import { previousRelease } from '../../../db/migrations/releases.js';
import type { Database } from '../../../db/schema.js';
import { createTestDb, SCHEMA, type TestDb } from '../../helpers/db.js';
import { migrateTo } from '../../helpers/schema-catalog.js';
import { eventually } from '../../helpers/temporal.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../../helpers/windows.js';

let t: TestDb;
let previous: Kysely<Database>;
const T0 = Date.parse('2026-11-03T00:00:00Z');
const JOB = 'upgrade-roll';
const ROLE = `tidemark_upgrade_worker_${process.pid}`;
// Roles are the server's, not the database's: dropped from outside the test database.
const admin = createDb(process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', {
  max: 1,
});

/** 0.1.0's migration files as it ran them: kysely's table in public, up to its last one. */
const previousList = Object.fromEntries(
  Object.entries(shipped).filter(([name]) => name <= previousRelease().last),
);

let gate: Promise<void> = Promise.resolve();
let entered: () => void = () => undefined;
const job = hourlyJob(JOB, T0, async (ctx) => {
  entered();
  await gate;
  await sql`insert into public.upgrade_sends (window_start) values (${ctx.window.start})`.execute(ctx.trx);
  return { input: 1, applied: 1, quarantined: 0 };
});
const windowAt = (i: number) => hourlyWindow(JOB, T0, i, windowPolicy(1, 120_000));
const run = (db: Kysely<Database>, i: number) =>
  directActivities(db, [job]).processWindow(windowAt(i)) as Promise<WindowResult>;

const relkind = async (schema: string, name: string) =>
  (
    await sql<{ kind: string }>`select c.relkind::text as kind from pg_class c
      join pg_namespace n on n.oid = c.relnamespace where n.nspname = ${schema} and c.relname = ${name}`.execute(
      t.db,
    )
  ).rows[0]?.kind;

before(async () => {
  t = await createTestDb({ migrated: false });
  // 0.1.0's connections resolved its bare names in public (the test database's own search_path is empty).
  previous = createDb(`${t.url}?options=${encodeURIComponent('-c search_path=public')}`, {
    schema: 'public',
    max: 4,
  });
  await migrateTo(previous, previousRelease().last, {}, previousList);
  await sql`create table public.upgrade_sends (window_start timestamptz primary key)`.execute(t.db);
  // The user's own objects, named like things of tidemark's that 0.1.0 never made: they stay.
  await sql`create table public.backup_checks (id int primary key, note text)`.execute(t.db);
  await sql`insert into public.backup_checks values (1, 'the shop''s own')`.execute(t.db);
  await sql`create function public.tidemark_span_backlog() returns int language sql as 'select 7'`.execute(
    t.db,
  );
  // The workers' own role, with rights on 0.1.0's tables as a least-privilege deployment grants them.
  await sql.raw(`create role ${ROLE} nologin`).execute(t.db);
  await sql.raw(`grant usage on schema public to ${ROLE}`).execute(t.db);
  await sql
    .raw(
      `grant select, insert, update, delete on public.job_windows, public.job_runs, public.job_watermarks to ${ROLE}`,
    )
    .execute(t.db);
});
after(async () => {
  await previous?.destroy();
  await t?.drop();
  await sql.raw(`drop role if exists ${ROLE}`).execute(admin);
  await admin.destroy();
});

test('the ledger of 0.1.0 moves into its schema while a worker of 0.1.0 is in a window: nothing is applied twice, nothing lost', async () => {
  assert.deepEqual(await run(previous, 0).then((r) => r.outcome), 'processed');
  const plan = await migrationPlan(t.db, {});
  assert.equal(plan.moveFromPublic, true);
  assert.ok(plan.ledger.length > 0 && plan.ledger.every((n) => n > previousRelease().last));

  // A window of the old worker holds its transaction open (its handler waits) as the upgrade begins.
  let release!: () => void;
  gate = new Promise((r) => (release = r));
  const inHandler = new Promise<void>((r) => (entered = r));
  const busy = run(previous, 1);
  await inHandler;
  const upgrade = migrate(t.db);
  // The move waits for the window's transaction: the window commits in public, then moves with it.
  await eventually(
    async () => {
      const waiting = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and query like '%set schema%'`.execute(
        t.db,
      );
      return waiting.rows[0]!.n > 0 ? true : undefined;
    },
    30_000,
    'the move to wait for the open window',
  );
  assert.equal(await relkind('public', 'job_windows'), 'r', 'the move waits for the open window');
  release();
  assert.equal((await busy).outcome, 'processed');
  const applied = await upgrade;
  assert.equal(applied.at(-1), Object.keys(shipped).at(-1));
  assert.equal(await relkind(SCHEMA, 'job_windows'), 'r');
  assert.equal(await relkind('public', 'job_windows'), 'v');

  // The old worker goes on through the views and wrappers; the new one refuses what either did.
  gate = Promise.resolve();
  assert.equal((await run(previous, 2)).outcome, 'processed');
  assert.equal((await run(previous, 1)).outcome, 'already-done');
  for (const i of [0, 1, 2]) assert.equal((await run(t.db, i)).outcome, 'already-done', `window ${i}`);
  assert.equal((await run(t.db, 3)).outcome, 'processed');
  const sends = await sql<{ n: number }>`select count(*)::int as n from public.upgrade_sends`.execute(t.db);
  assert.equal(sends.rows[0]!.n, 4);
  const marked = await t.db
    .selectFrom('job_windows')
    .select(['window_start', 'status'])
    .where('job', '=', JOB)
    .orderBy('window_start')
    .execute();
  assert.deepEqual(
    marked.map((m) => m.status),
    ['done', 'done', 'done', 'done'],
  );
  assert.equal((await migrationPlan(t.db, {})).moveFromPublic, false);
});

test("the move takes only what 0.1.0's migrations made: the user's table and function of tidemark-like names stay", async () => {
  assert.equal(await relkind('public', 'backup_checks'), 'r');
  assert.equal(await relkind(SCHEMA, 'backup_checks'), 'r', "tidemark's own, made by its migration");
  const theirs = await sql<{ note: string }>`select note from public.backup_checks`.execute(t.db);
  assert.deepEqual(theirs.rows, [{ note: "the shop's own" }]);
  const fn = await sql<{ v: number }>`select public.tidemark_span_backlog() as v`.execute(t.db);
  assert.equal(fn.rows[0]!.v, 7);
});

test("a worker role with rights on 0.1.0's tables keeps them through the views, and reaches the tables in the schema", async () => {
  await t.db.connection().execute(async (c) => {
    await sql.raw(`set role ${ROLE}`).execute(c);
    try {
      const viaView = await sql<{ n: number }>`select count(*)::int as n from public.job_windows`.execute(c);
      assert.ok(viaView.rows[0]!.n >= 4);
      const direct = await sql<{
        n: number;
      }>`select count(*)::int as n from ${sql.id(SCHEMA, 'job_runs')}`.execute(c);
      assert.ok(direct.rows[0]!.n >= 4);
      await assert.rejects(sql`select 1 from public.effects`.execute(c), /permission denied/);
    } finally {
      await sql`reset role`.execute(c);
    }
  });
});

test('a worker of 0.1.0 restarting after the upgrade refuses to start: it makes no second ledger in public', async () => {
  const migrator = new Migrator({
    db: previous.withoutPlugins(),
    migrationTableSchema: 'public',
    provider: { getMigrations: async () => previousList },
  });
  const { error } = await migrator.migrateToLatest();
  assert.match(String((error as Error)?.message), /previously executed migration .* is missing/);
  assert.equal(await relkind('public', 'job_windows'), 'v');
});

test('`tidemark migrate --drop-public-compat --dry-run` names what it would drop and drops nothing', async () => {
  const { stdout } = await promisify(execFile)(
    'node',
    ['bin/tidemark.js', 'migrate', '--drop-public-compat', '--dry-run'],
    {
      cwd: fileURLToPath(new URL('../../..', import.meta.url)),
      env: { ...process.env, DATABASE_URL: t.url },
    },
  );
  assert.match(stdout, /^would drop from schema public what workers of 0\.1\.0 used: .*\bjob_windows\b/m);
  assert.match(stdout, /tidemark_claim_window\(\)/);
  assert.equal(await relkind('public', 'job_windows'), 'v', 'the view is still there');
  assert.equal(await relkind('public', 'effects'), 'v');
});

test('dropping what 0.1.0 used leaves public without the ledger; the current worker goes on', async () => {
  const dropped = await dropPublicCompat(t.db);
  assert.ok(dropped.includes('job_windows') && dropped.includes('tidemark_claim_window()'), dropped.join());
  for (const name of [
    'job_windows',
    'job_runs',
    'job_watermarks',
    'effects',
    'incidents',
    'kysely_migration',
  ])
    assert.equal(await relkind('public', name), undefined, name);
  // The demo's tables of 0.1.0 stay, the user's to keep or drop.
  assert.equal(await relkind('public', 'orders'), 'r');
  const fns = await sql<{ name: string }>`select p.proname as name from pg_proc p
      join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'public'`.execute(t.db);
  assert.deepEqual(
    fns.rows.map((f) => f.name),
    ['tidemark_span_backlog'],
    "only the user's own function is left",
  );
  assert.equal(await relkind('public', 'backup_checks'), 'r', "the user's own table is left");
  assert.deepEqual(await dropPublicCompat(t.db), []);
  assert.equal((await run(t.db, 4)).outcome, 'processed');
});
