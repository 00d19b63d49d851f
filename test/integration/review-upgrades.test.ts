// Upgrade review (issue 14): hosts that start at once on a database that does not exist yet, and
// what `npm run migrate` says about a DATABASE_URL it cannot use (never its password).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createDb, ensureDatabase, migrate } from '../../db/database.js';
import { migrations } from '../../db/migrations/index.js';
import { previousRelease } from '../../db/migrations/releases.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { migrateTo } from '../helpers/schema-catalog.js';
import { eventually } from '../helpers/temporal.js';

const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const names: string[] = [];
const dbs: TestDb[] = [];
after(async () => {
  for (const t of dbs) await t.drop();
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  for (const n of names) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(n)} WITH (FORCE)`);
  await admin.end();
});

test('hosts starting at once on a database that does not exist yet all go on: one creates it, none fails', async () => {
  // Each round: four hosts' ensureDatabase() at once (two CREATE DATABASE at once: one of them failed
  // with a unique violation on pg_database, reported as "cannot be reached").
  for (let round = 0; round < 4; round++) {
    const name = `tidemark_test_${process.pid}_new_${randomBytes(4).toString('hex')}`;
    names.push(name);
    const u = new URL(serverUrl);
    u.pathname = `/${name}`;
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => ensureDatabase(u.toString())));
    assert.deepEqual(
      results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : [])),
      [],
    );
  }
});

/** `npm run migrate` with DATABASE_URL=url: its exit code and what it printed. */
function migrateCli(url: string): { status: number | null; out: string } {
  const r = spawnSync('npx', ['tsx', 'bin/migrate.ts'], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    env: { ...process.env, DATABASE_URL: url },
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

test('`npm run migrate` with a user the server refuses says so (not "cannot be reached, start it"), without the password', () => {
  const u = new URL(serverUrl);
  u.username = 'tidemark_no_such_role';
  u.password = 'migrate-cli-secret-7c1e';
  u.pathname = '/tidemark_unused';
  const { status, out } = migrateCli(u.toString());
  assert.equal(status, 1, out);
  assert.doesNotMatch(out, /migrate-cli-secret-7c1e/);
  assert.doesNotMatch(out, /cannot be reached|Start it/, out);
  assert.match(out, /refused the login.*tidemark_no_such_role.*DATABASE_URL/s, out);
});

test('`npm run migrate` with a database name that is not valid percent-encoding names DATABASE_URL, not a bare "URI malformed"', () => {
  const u = new URL(serverUrl);
  u.password = 'migrate-cli-secret-7c1e';
  u.pathname = '/tidemark_%ZZ';
  const { status, out } = migrateCli(u.toString());
  assert.equal(status, 1, out);
  assert.doesNotMatch(out, /migrate-cli-secret-7c1e/);
  assert.match(out, /database name in DATABASE_URL/, out);
});

/** The migrations the previous release's code knows (its list ends at the release's last one). */
const previousList = () =>
  Object.fromEntries(Object.entries(migrations).filter(([name]) => name <= previousRelease().last));

test("a worker of older code (the previous release's list) restarting after a newer release migrated starts: nothing to do", async () => {
  // Workers migrate at start: one of the previous version restarted during the roll (a crash, a
  // drained node) or rolled back to met "corrupted migrations: previously executed migration
  // 20261201T1000_done_spans is missing" and never started, though the schema only expanded
  // (0.1.0's own migrate still does: this holds for releases from this one on).
  const t = await createTestDb();
  dbs.push(t);
  assert.ok(Object.keys(previousList()).length < Object.keys(migrations).length);
  assert.deepEqual(await migrate(t.db, previousList()), []);
  // Its CLI too (cli/context.ts migrates before its first query).
  assert.deepEqual(await migrate(t.db, previousList()), []);
});

test('workers of both versions starting at once on a database of the previous release: both start, the new one migrates', async () => {
  for (let round = 0; round < 3; round++) {
    const t = await createTestDb({ migrated: false });
    dbs.push(t);
    await migrateTo(t.db, previousRelease().last);
    const [a, b] = [createDb(t.url, { max: 1 }), createDb(t.url, { max: 1 })];
    try {
      const [newer, older] = await Promise.all([migrate(a), migrate(b, previousList())]);
      assert.deepEqual(
        newer,
        Object.keys(migrations).filter((n) => n > previousRelease().last),
      );
      assert.deepEqual(older, []);
    } finally {
      await Promise.all([a.destroy(), b.destroy()]);
    }
  }
});

test('`npm run migrate` for a database that does not exist, as a user who may not create it, says so (not "cannot be reached")', async () => {
  const role = `tidemark_test_nocreatedb_${process.pid}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE ROLE ${pg.escapeIdentifier(role)} LOGIN PASSWORD 'migrate-cli-secret-7c1e'`);
  try {
    const u = new URL(serverUrl);
    u.username = role;
    u.password = 'migrate-cli-secret-7c1e';
    u.pathname = `/tidemark_test_${process.pid}_absent`;
    const { status, out } = migrateCli(u.toString());
    assert.equal(status, 1, out);
    assert.doesNotMatch(out, /migrate-cli-secret-7c1e/);
    assert.doesNotMatch(out, /cannot be reached|Start it/, out);
    assert.match(out, /does not exist.*could not create it.*permission denied/s, out);
  } finally {
    await admin.query(`DROP ROLE ${pg.escapeIdentifier(role)}`);
    await admin.end();
  }
});

test('a newer migration committed while an older worker waits for the migration lock: it reads again and starts', async () => {
  const t = await createTestDb();
  dbs.push(t);
  // kysely's migration lock (its PostgreSQL adapter's advisory lock id), held while "a newer release"
  // records a migration this code does not know.
  const holder = new pg.Client({ connectionString: t.url });
  await holder.connect();
  try {
    await holder.query('select pg_advisory_lock(3853314791062309107)');
    const older = migrate(t.db);
    await eventually(
      async () =>
        (
          await holder.query(`select 1 from pg_stat_activity where datname = current_database()
             and wait_event_type = 'Lock' and wait_event = 'advisory'`)
        ).rowCount === 1 || undefined,
      30_000,
      'the older migrate to wait for the lock',
    );
    await holder.query(
      `insert into kysely_migration (name, timestamp) values ('29991231T2359_newer', now())`,
    );
    await holder.query('select pg_advisory_unlock(3853314791062309107)');
    assert.deepEqual(await older, []);
  } finally {
    await holder.end();
  }
});
