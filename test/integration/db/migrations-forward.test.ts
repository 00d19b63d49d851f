// Migrations are forward-only: the list is in file-name order, a released file is never edited,
// migrating again changes nothing, and two workers migrating at once apply each migration once. And
// the upgrade around them: hosts and workers of two releases starting at once, and what
// `tidemark migrate` says about a DATABASE_URL it cannot use.
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { createDb, migrate, ensureDatabase } from '../../../db/database.js';
import { migrations } from '../../../db/migrations/index.js';
import { releases, previousRelease } from '../../../db/migrations/releases.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';
import { eventually } from '../../helpers/temporal.js';
import { snapshotCatalog, migrateTo } from '../../helpers/schema-catalog.js';

const dir = new URL('../../../db/migrations/', import.meta.url);
const dbs: TestDb[] = [];
after(async () => {
  for (const t of dbs) await t.drop();
});
const emptyDb = async (): Promise<TestDb> => {
  const t = await createTestDb({ migrated: false });
  dbs.push(t);
  return t;
};

test('the list is every migration file, in file-name order', async () => {
  const files = (await readdir(dir))
    .filter((f) => /^\d{8}T\d{4}_.+\.ts$/.test(f))
    .map((f) => f.replace(/\.ts$/, ''))
    .sort();
  assert.deepEqual(Object.keys(migrations), files);
});

test('a migration imports no file of the project, so its own text is all it runs', async () => {
  // A released migration is frozen, but what it imports is not: an edit there would change it.
  const imports: string[] = [];
  for (const name of Object.keys(migrations)) {
    const text = await readFile(new URL(`${name}.ts`, dir), 'utf8');
    for (const [, spec] of text.matchAll(/\b(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g))
      if (spec!.startsWith('.') || spec!.startsWith('/')) imports.push(`${name} imports ${spec}`);
  }
  assert.deepEqual(imports, []);
});

test('a released migration file is never edited, and every release point is in the list', async () => {
  const names = Object.keys(migrations);
  for (const r of releases) {
    assert.ok(names.includes(r.last), `release ${r.name}: its last migration ${r.last} is in the list`);
    const shipped = names.slice(0, names.indexOf(r.last) + 1);
    assert.deepEqual(
      Object.keys(r.sha256),
      shipped,
      `release ${r.name} records the SHA-256 of every file it shipped`,
    );
    for (const name of shipped) {
      const text = await readFile(new URL(`${name}.ts`, dir));
      assert.equal(
        createHash('sha256').update(text).digest('hex'),
        r.sha256[name],
        `${name}.ts shipped in ${r.name} and was edited since: undo the edit and add a new migration`,
      );
    }
  }
});

test('migrating again is a no-op', async () => {
  const t = await emptyDb();
  assert.deepEqual(await migrate(t.db), Object.keys(migrations));
  const before = await snapshotCatalog(t.db);
  assert.deepEqual(await migrate(t.db), []);
  assert.deepEqual(await snapshotCatalog(t.db), before);
});

test('two workers migrating at once: one applied set, serialised by the migration lock', async () => {
  const t = await emptyDb();
  // kysely takes a session-level advisory lock around a migration run (its PostgreSQL adapter's id).
  const LOCK = '3853314791062309107';
  const holder = createDb(t.url, { max: 1 });
  const a = createDb(t.url, { max: 2 });
  const b = createDb(t.url, { max: 2 });
  try {
    // Hold the lock on one session; both migrations wait for it, and apply nothing meanwhile.
    await sql`select 1`.execute(holder);
    const conn = await holder.connection().execute(async (c) => {
      await sql`select pg_advisory_lock(${sql.lit(LOCK)})`.execute(c);
      const runs = Promise.all([migrate(a), migrate(b)]);
      runs.catch(() => undefined);
      await eventually(
        async () => {
          const r = await sql<{ n: number }>`select count(*)::int as n from pg_locks
            where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`.execute(
            c,
          );
          return r.rows[0]!.n === 2 ? true : undefined;
        },
        60_000,
        'both migrations waiting for the lock',
      );
      const applied = await sql<{
        n: number;
      }>`select count(*)::int as n from ${tm.object('kysely_migration')}`
        .execute(c)
        .catch(() => ({ rows: [{ n: 0 }] }));
      assert.equal(applied.rows[0]!.n, 0, 'nothing applied while the lock is held');
      await sql`select pg_advisory_unlock(${sql.lit(LOCK)})`.execute(c);
      return runs;
    });
    const [ra, rb] = await conn;
    // One of them applied everything; the other, after it, found nothing pending.
    assert.deepEqual([...ra, ...rb].sort(), Object.keys(migrations).sort());
    assert.ok(ra.length === 0 || rb.length === 0, `both applied some: ${ra.length} and ${rb.length}`);
    const rows = await sql<{
      name: string;
    }>`select name from ${tm.object('kysely_migration')} order by name`.execute(t.db);
    assert.deepEqual(
      rows.rows.map((r) => r.name),
      Object.keys(migrations),
    );
  } finally {
    await Promise.all([holder.destroy(), a.destroy(), b.destroy()]);
  }
});

/** `tidemark migrate` (what `tidemark migrate` runs) with DATABASE_URL=url and `args`: what it printed. */
const migrateCommand = (url: string, ...args: string[]) =>
  promisify(execFile)('node', ['bin/tidemark.js', 'migrate', ...args], {
    cwd: fileURLToPath(new URL('../../..', import.meta.url)),
    env: { ...process.env, DATABASE_URL: url },
  }).then((r) => r.stdout.trim());

test('`tidemark migrate` says what it would apply, applies the pending migrations to DATABASE_URL, then finds none', async () => {
  const t = await emptyDb();
  const names = Object.keys(migrations);
  assert.equal(
    await migrateCommand(t.url, '--dry-run'),
    `ledger (schema ${SCHEMA}): would apply ${names.length}, last ${names.at(-1)}\n` +
      'catalog: none named (--catalog, TIDEMARK_CATALOG or tidemark.config.*): only the ledger is migrated',
  );
  assert.equal(
    (
      await sql<{ t: string | null }>`select to_regclass(${`${SCHEMA}.kysely_migration`})::text as t`.execute(
        t.db,
      )
    ).rows[0]!.t,
    null,
    'a dry run changes nothing',
  );
  assert.match(await migrateCommand(t.url), new RegExp(`applied ${names.length}, last ${names.at(-1)}`));
  assert.match(await migrateCommand(t.url), new RegExp(`^ledger \\(schema ${SCHEMA}\\): up to date$`, 'm'));
  const rows = await sql<{
    n: number;
  }>`select count(*)::int as n from ${tm.object('kysely_migration')}`.execute(t.db);
  assert.equal(rows.rows[0]!.n, names.length);
});

test('`tidemark migrate --dry-run` on a database that does not exist says so and creates nothing', async () => {
  const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const u = new URL(serverUrl);
  u.pathname = `/tidemark_test_${process.pid}_dry_absent`;
  assert.match(
    await migrateCommand(u.toString(), '--dry-run'),
    /^the database of DATABASE_URL \(.*_dry_absent\) does not exist: tidemark migrate would create it/,
  );
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    const found = await admin.query('select 1 from pg_database where datname = $1', [u.pathname.slice(1)]);
    assert.equal(found.rowCount, 0);
  } finally {
    await admin.end();
  }
});

test('three processes migrating a fresh database at once: one applies every migration, the others none', async () => {
  const t = await emptyDb();
  const outs = await Promise.all([1, 2, 3].map(() => migrateCommand(t.url)));
  const said = outs.map((o) => o.split('\n')[0]).sort();
  const n = Object.keys(migrations).length;
  assert.deepEqual(said, [
    `ledger (schema ${SCHEMA}): applied ${n}, last ${Object.keys(migrations).at(-1)}`,
    `ledger (schema ${SCHEMA}): up to date`,
    `ledger (schema ${SCHEMA}): up to date`,
  ]);
  const rows = await sql<{
    name: string;
  }>`select name from ${tm.object('kysely_migration')} order by name`.execute(t.db);
  assert.deepEqual(
    rows.rows.map((r) => r.name),
    Object.keys(migrations),
  );
});

// Upgrades: hosts that start at once on a database that does not exist yet, workers of the previous and
// the current release, and what `tidemark migrate` says about a DATABASE_URL it cannot use (never its
// password).
describe('upgrades: a database not there yet, workers of two releases, what `tidemark migrate` says', () => {
  const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const names: string[] = [];
  const dbs: TestDb[] = [];
  after(async () => {
    for (const t of dbs) await t.drop();
    const admin = new pg.Client({ connectionString: serverUrl });
    await admin.connect();
    for (const n of names)
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(n)} WITH (FORCE)`);
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

  /** `tidemark migrate` with DATABASE_URL=url: its exit code and what it printed. */
  function migrateCli(url: string): { status: number | null; out: string } {
    const r = spawnSync('node', ['bin/tidemark.js', 'migrate'], {
      cwd: fileURLToPath(new URL('../../..', import.meta.url)),
      env: { ...process.env, DATABASE_URL: url },
      encoding: 'utf8',
      timeout: 120_000,
    });
    return { status: r.status, out: `${r.stdout}${r.stderr}` };
  }

  test('`tidemark migrate` with a user the server refuses says so (not "cannot be reached, start it"), without the password', () => {
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

  test('`tidemark migrate` with a database name that is not valid percent-encoding names DATABASE_URL, not a bare "URI malformed"', () => {
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

  test('`tidemark migrate` for a database that does not exist, as a user who may not create it, says so (not "cannot be reached")', async () => {
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
        `insert into ${SCHEMA}.kysely_migration (name, timestamp) values ('29991231T2359_newer', now())`,
      );
      await holder.query('select pg_advisory_unlock(3853314791062309107)');
      assert.deepEqual(await older, []);
    } finally {
      await holder.end();
    }
  });
});
