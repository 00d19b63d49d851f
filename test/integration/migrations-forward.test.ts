// Migrations are forward-only: the list is in file-name order, a released file is never edited,
// migrating again changes nothing, and two workers migrating at once apply each migration once.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { createDb, migrate } from '../../db/database.js';
import { migrations } from '../../db/migrations/index.js';
import { releases } from '../../db/migrations/releases.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { eventually } from '../helpers/temporal.js';
import { snapshotCatalog } from '../helpers/schema-catalog.js';

const dir = new URL('../../db/migrations/', import.meta.url);
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
      const applied = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`
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
    const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(t.db);
    assert.deepEqual(
      rows.rows.map((r) => r.name),
      Object.keys(migrations),
    );
  } finally {
    await Promise.all([holder.destroy(), a.destroy(), b.destroy()]);
  }
});

test('`npm run migrate` applies the pending migrations to DATABASE_URL, then finds none', async () => {
  const t = await emptyDb();
  const run = () =>
    execFileSync('npm', ['run', '--silent', 'migrate'], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      env: { ...process.env, DATABASE_URL: t.url },
      encoding: 'utf8',
    });
  assert.match(
    run(),
    new RegExp(
      `applied ${Object.keys(migrations).length} migrations, last ${Object.keys(migrations).at(-1)}`,
    ),
  );
  assert.match(run(), /no pending migrations/);
  const rows = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`.execute(t.db);
  assert.equal(rows.rows[0]!.n, Object.keys(migrations).length);
});

test('three processes migrating a fresh database at once: one applies every migration, the others none', async () => {
  const t = await emptyDb();
  const run = promisify(execFile);
  const outs = await Promise.all(
    [1, 2, 3].map(() =>
      run('npm', ['run', '--silent', 'migrate'], {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        env: { ...process.env, DATABASE_URL: t.url },
      }),
    ),
  );
  const said = outs.map((o) => o.stdout.trim()).sort();
  const n = Object.keys(migrations).length;
  assert.deepEqual(said, [
    `applied ${n} migrations, last ${Object.keys(migrations).at(-1)}`,
    'no pending migrations',
    'no pending migrations',
  ]);
  const rows = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(t.db);
  assert.deepEqual(
    rows.rows.map((r) => r.name),
    Object.keys(migrations),
  );
});
