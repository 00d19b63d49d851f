// docs/restore.md, the page to get data back, run as written: every ```sh block of it goes to bash from the
// project root, the test setting only environment variables (the catalog, the ledger, the target,
// the keys). The backups are made by the real job on a real worker: in a directory and on an
// S3-compatible server (moto), plain and encrypted, and across a key rotation. Each restore is
// compared with the source row by row as it was when that backup was made.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { sql } from 'kysely';
import pg from 'pg';
import { memoryLogger } from '../../../activities/logger.js';
import type { Catalog } from '../../../schedules/job.js';
import { isoUtc } from '../../../contract/window-key.js';
import type { WindowRunResult } from '../../../contract/workflows.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { startS3, type TestS3 } from '../../helpers/s3.js';
import { runToEnd } from '../../helpers/spawn.js';
import { startTemporal, uniqueQueue, withWorker, windowPolicy } from '../../helpers/temporal.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const JOB = 'db-backup';
/** The two windows the section's commands name or imply: `--key` the first, `--latest` the second. */
const FIRST = '2026-10-01T00:00:00Z';
const SECOND = '2026-10-02T00:00:00Z';
/** Where the section's `--to-file` step writes; removed around each scenario. */
const DUMP_FILE = '/tmp/db-backup.dump';
const SQL_FILE = '/tmp/db-backup.sql';

// ---- The section and its blocks -------------------------------------------------------------

/** The whole page: its steps, keys, drill and the table of what a failed verify means. */
const section = await readFile(join(ROOT, 'docs', 'restore.md'), 'utf8');
const blocks = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
const ran = new Set<string>();
/** Every block run and what it printed, in order. */
const log: { script: string; out: string; err: string }[] = [];

/** The one block `match` picks out (the test fails if none or several do). */
function block(what: string, match: (b: string) => boolean): string {
  const found = blocks.filter(match);
  assert.equal(found.length, 1, `one sh block of docs/restore.md ${what}: ${found.length} found`);
  return found[0]!;
}

const B = {
  list: block('lists backups', (b) => b.includes('backups list')),
  verify: block('verifies', (b) => b.includes('backups verify')),
  restore: block('restores into a database', (b) => b.includes('--into') && !b.includes('--clean')),
  clean: block('restores with --clean', (b) => b.includes('--clean')),
  toFile: block('writes a file', (b) => b.includes('--to-file')),
  newKey: block('makes a key', (b) => b.includes('openssl rand')),
  drill: block('drills', (b) => b.includes('backups drill')),
};

interface Ran {
  code: number | null;
  out: string;
  err: string;
}

/** A block as written, through bash from the project root; stops at its first failing command. */
async function sh(script: string, env: Record<string, string>): Promise<Ran> {
  ran.add(script);
  const r = await runToEnd('bash', ['-euo', 'pipefail', '-c', script], env);
  log.push({ script, out: r.out, err: r.err });
  if (script === B.verify) checkRuns.push(...checksPrinted(r.out));
  return r;
}

/** Each verification's check names, in the order printed ("ok: ..." then "  ok     read ..." lines). */
function checksPrinted(out: string): string[][] {
  return out
    .split(/^(?:ok|FAILED): /m)
    .slice(1)
    .map((one) => [...one.matchAll(/^ {2}(?:ok {4}|FAILED) (\S+)/gm)].map((m) => m[1]!));
}
/** The check names every verification the blocks ran printed. */
const checkRuns: string[][] = [];

const ok = (r: Ran, what: string) => assert.equal(r.code, 0, `${what}:\n${r.out}\n${r.err}`);
const failed = (r: Ran, what: string) => assert.equal(r.code, 1, `${what} should fail:\n${r.out}\n${r.err}`);

// ---- The stack: Temporal, one source database, moto ------------------------------------------

const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
let temporal: TestWorkflowEnvironment;
let source: TestDb;
let s3: TestS3;
let nextId = 1;

before(async () => {
  [temporal, source, s3] = await Promise.all([startTemporal(), createTestDb({ migrated: false }), startS3()]);
  await sql`create table public.orders (id int primary key, placed_at timestamptz not null, amount numeric(10, 2) not null, note text)`.execute(
    source.db,
  );
  await addOrders(300);
});
after(async () => {
  await source?.drop();
  await s3?.close();
  await temporal?.teardown();
  await rm(DUMP_FILE, { force: true });
  await rm(SQL_FILE, { force: true });
});

/** `n` more orders, and one older order changed: a later backup differs in content, not only in count. */
async function addOrders(n: number): Promise<void> {
  const from = nextId;
  nextId += n;
  await sql`insert into public.orders select g, timestamptz '2026-09-30 12:00:00+00' + g * interval '7 minutes', (g * 37 % 10000) / 100.0, case when g % 5 = 0 then null else 'order ' || g || E'\twith ''quotes''\nand a line' end from generate_series(${from}::int, ${nextId - 1}::int) g`.execute(
    source.db,
  );
  await sql`update public.orders set amount = amount + 1, note = 'changed at ' || ${n}::int where id = 1`.execute(
    source.db,
  );
}

/** Every row of `orders` in `url`, as JSON text, by id. */
async function rowsOf(url: string): Promise<string[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ r: string }>('select to_jsonb(o)::text as r from public.orders o order by id');
    return r.rows.map((x) => x.r);
  } finally {
    await c.end();
  }
}

/** A database URL on the test server under a name of its own; dropped by `dropDb`. */
function newDbUrl(tag: string): string {
  const u = new URL(serverUrl);
  u.pathname = `/tidemark_restore_${tag}_${process.pid}_${randomBytes(3).toString('hex')}`;
  return u.toString();
}

async function onServer(statement: (name: string) => string, url: string): Promise<void> {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin
    .query(statement(pg.escapeIdentifier(new URL(url).pathname.slice(1))))
    .finally(() => admin.end());
}
const createDb = (url: string) => onServer((name) => `create database ${name}`, url);
const dropDb = (url: string) => onServer((name) => `drop database if exists ${name} with (force)`, url);

// ---- A scenario: its catalog module, ledger and backups ---------------------------------------

const moduleUrl = (path: string) => JSON.stringify(pathToFileURL(join(ROOT, path)).href);

interface Scenario {
  ledger: TestDb;
  catalogPath: string;
  catalog: Catalog;
  /** What every block gets: the catalog, the ledger, Temporal and the target of step 3. */
  env: Record<string, string>;
  restoreUrl: string;
  scratchUrl: string;
  dir: string;
}

/**
 * A catalog module as a user writes one (only the imports point into this tree), in a temp dir:
 * the job `db-backup` of the source database to `destination` (TypeScript source text).
 */
async function scenario(
  tag: string,
  destination: 'localDestination' | 's3Destination',
  settings: string,
  encryption?: object,
): Promise<Scenario> {
  await rm(DUMP_FILE, { force: true });
  await rm(SQL_FILE, { force: true });
  const dir = await mkdtemp(join(tmpdir(), `tidemark-restore-${tag}-`));
  const scratchUrl = newDbUrl(`${tag}_drill`);
  // TypeScript, loaded by the CLI through tsx with its own copies of tidemark's modules (as from the
  // package): the CLI must still find the job's backups.
  const catalogPath = join(dir, 'tidemark.config.ts');
  await writeFile(
    catalogPath,
    `import { databaseBackup } from ${moduleUrl('jobs/backup/index.ts')};
import { ${destination} } from ${moduleUrl('jobs/backup/destination.ts')};
import { defineCatalog } from ${moduleUrl('schedules/define.ts')};

export default defineCatalog([
  databaseBackup({
    name: ${JSON.stringify(JOB)},
    grid: 'day',
    start: ${JSON.stringify(FIRST)},
    database: ${JSON.stringify(source.url)},
    destination: ${destination}(${settings.replace('$DIR', JSON.stringify(join(dir, 'backups')))}),
    ${encryption ? `encryption: ${JSON.stringify(encryption)},` : ''}
    retention: { daily: 7, weekly: 0, monthly: 0 },
    tables: ['public.orders'],
    restoreCheck: { every: 7, scratchDatabaseUrl: ${JSON.stringify(scratchUrl)} },
  }),
]);
`,
  );
  const catalog = ((await import(pathToFileURL(catalogPath).href)) as { default: Catalog }).default;
  const ledger = await createTestDb();
  const restoreUrl = newDbUrl(tag);
  return {
    ledger,
    catalogPath,
    catalog,
    dir,
    scratchUrl,
    restoreUrl,
    env: {
      DATABASE_URL: ledger.url,
      TIDEMARK_CATALOG: catalogPath,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: temporal.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: uniqueQueue('restore-readme'),
      RESTORE_URL: restoreUrl,
    },
  };
}

async function endScenario(s: Scenario): Promise<void> {
  await s.ledger.drop();
  await dropDb(s.restoreUrl);
  await dropDb(s.scratchUrl);
  await rm(s.dir, { recursive: true, force: true });
}

/** The window starting at `start` run by the real job on a real worker; the source's rows at that time. */
async function backUp(s: Scenario, start: string): Promise<string[]> {
  const rows = await rowsOf(source.url);
  const taskQueue = uniqueQueue('restore-readme');
  const end = new Date(Date.parse(start) + 86_400_000).toISOString().replace('.000Z', 'Z');
  const key = `${JOB}/${isoUtc(new Date(start))}`;
  const result = await withWorker(
    temporal,
    taskQueue,
    { db: s.ledger.db, catalog: s.catalog, logger: memoryLogger(), now: () => new Date() },
    () =>
      temporal.client.workflow.execute('window', {
        taskQueue,
        workflowId: `${key}-${taskQueue}`,
        args: [
          { job: JOB, start, end, generation: 0, key, trigger: 'manual', policy: windowPolicy(1, 120_000) },
        ],
      }) as Promise<WindowRunResult>,
  );
  assert.equal(result.outcome, 'processed', key);
  return rows;
}

/** The ledger's record of the job's backups, newest first: window key, encrypted, key id. */
async function recorded(s: Scenario) {
  const rows = await s.ledger.db
    .selectFrom('backups')
    .select(['window_key', 'encrypted', 'key_id'])
    .where('job', '=', JOB)
    .orderBy('window_start', 'desc')
    .execute();
  return rows.map((r) => [r.window_key, r.encrypted, r.key_id]);
}

/**
 * Steps 1-4 as written, checked against the source: `--latest` (the second window) into
 * RESTORE_URL (and, with `again`, refused when run once more), then with --clean; the first window
 * to a file and on through pg_restore's SQL script into a fresh database.
 */
async function restoreSteps(s: Scenario, first: string[], second: string[], again: boolean): Promise<void> {
  const list = await sh(B.list, s.env);
  ok(list, 'step 1, list');
  for (const key of [`${JOB}/${FIRST}`, `${JOB}/${SECOND}`]) assert.match(list.out, new RegExp(key), key);

  ok(await sh(B.verify, s.env), 'step 2, verify');

  ok(await sh(B.restore, s.env), 'step 3, restore --into');
  assert.deepEqual(await rowsOf(s.restoreUrl), second, 'restored --latest: the second backup, row by row');
  if (again) {
    const refused = await sh(B.restore, s.env);
    failed(refused, 'step 3 again into the restored (non-empty) database');
    assert.match(refused.out + refused.err, /not empty.*--clean/s, 'the refusal names --clean');
    assert.deepEqual(await rowsOf(s.restoreUrl), second, 'a refused restore changes nothing');
  }
  ok(await sh(B.clean, s.env), 'step 3, --clean');
  assert.deepEqual(await rowsOf(s.restoreUrl), second, 'restored with --clean');

  const toFile = await sh(B.toFile, s.env);
  ok(toFile, 'step 4, --to-file and pg_restore');
  assert.match(toFile.out, /TABLE DATA public orders/, "pg_restore --list shows the table's data");
  const plain = newDbUrl('plain');
  try {
    await createDb(plain);
    const psql = await runToEnd('psql', ['-v', 'ON_ERROR_STOP=1', '-q', '-d', plain, '-f', SQL_FILE], {});
    ok(psql, 'the SQL script loads with psql');
    assert.deepEqual(await rowsOf(plain), first, '--key the first window: the first backup, row by row');
  } finally {
    await dropDb(plain);
  }
}

// ---- The scenarios ------------------------------------------------------------------------------

test('a directory, not encrypted: list, verify, restore (refused when not empty, then --clean), a plain file, the drill; a damaged backup fails verify', async () => {
  const s = await scenario('dir', 'localDestination', '$DIR');
  try {
    const first = await backUp(s, FIRST);
    await addOrders(40);
    const second = await backUp(s, SECOND);
    assert.deepEqual(await recorded(s), [
      [`${JOB}/${SECOND}`, false, null],
      [`${JOB}/${FIRST}`, false, null],
    ]);
    await restoreSteps(s, first, second, true);

    // The drill on demand passes, and `tidemark jobs` shows it.
    const drill = await sh(B.drill, s.env);
    ok(drill, 'drill and jobs');
    assert.match(drill.out, /drill of db-backup \S+ .*: passed/);
    assert.match(drill.out, /LAST DRILL/);
    assert.match(drill.out, /^db-backup .* passed at \S+$/m, 'tidemark jobs: the last drill passed');

    // Refusing the source, the ledger and a non-empty database without --clean, and a failed drill's
    // incident: test/integration/jobs/backup/backups-cli.test.ts, through the same command without a process each.

    // One byte of the newest backup changed on the storage: verify fails on its sha256.
    const file = join(s.dir, 'backups', JOB, `${SECOND.replace(/[-:]/g, '')}.dump`);
    const size = (await stat(file)).size;
    const fh = await open(file, 'r+');
    const byte = Buffer.alloc(1);
    await fh.read(byte, 0, 1, Math.floor(size / 2));
    byte[0] = byte[0]! ^ 0xff;
    await fh.write(byte, 0, 1, Math.floor(size / 2));
    await fh.close();
    const bad = await sh(B.verify, s.env);
    failed(bad, 'verify of a damaged backup');
    assert.match(bad.out, /^ {2}FAILED sha256 /m, 'the failed check is named');
  } finally {
    await endScenario(s);
  }
});

test('S3-compatible storage, encrypted with keys from the environment, across a rotation: old and new backups restore', async () => {
  await s3.createBucket('restore-readme');
  const s = await scenario(
    's3',
    's3Destination',
    `{ bucket: 'restore-readme', endpoint: ${JSON.stringify(s3.endpoint)}, accessKeyId: 'test', secretAccessKey: 'test' }`,
    { env: 'DB_BACKUP_KEYS' },
  );
  const k1 = randomBytes(32).toString('base64');
  try {
    // Keys are read at use time: the worker in this process sees each list as it is set.
    process.env.DB_BACKUP_KEYS = `k1:${k1}`;
    const first = await backUp(s, FIRST);
    await addOrders(40);
    // The section's own way to make a key gives the new one.
    const made = await sh(B.newKey, s.env);
    ok(made, 'openssl rand');
    const k2 = made.out.trim();
    assert.equal(Buffer.from(k2, 'base64').length, 32, 'a 32-byte key in base64');
    process.env.DB_BACKUP_KEYS = `k2:${k2},k1:${k1}`;
    const second = await backUp(s, SECOND);
    assert.deepEqual(await recorded(s), [
      [`${JOB}/${SECOND}`, true, 'k2'],
      [`${JOB}/${FIRST}`, true, 'k1'],
    ]);
    const logged = log.length;
    // Old (k1, --key) and new (k2, --latest) both verify and restore.
    await restoreSteps(s, first, second, false);

    // Without k1 the backups made with it cannot be read: verify of the first fails and says which key.
    const withoutK1 = await sh(B.verify, { ...s.env, DB_BACKUP_KEYS: `k2:${k2}` });
    failed(withoutK1, 'verify of a k1 backup with k1 removed');
    assert.match(withoutK1.out, /^ok: db-backup db-backup\/2026-10-02/m, 'the newest (k2) still verifies');
    assert.match(withoutK1.out, /^ {2}FAILED key +.*key id "k1"/m, 'the old one names its missing key');
    for (const { script, out, err } of log.slice(logged))
      assert.ok(![k1, k2].some((k) => (out + err).includes(k)), `no key in the output of ${script}`);
  } finally {
    delete process.env.DB_BACKUP_KEYS;
    await endScenario(s);
  }
});

test('a directory, encrypted with keys from a file (one window): restore after a new key was put in front', async () => {
  const keys = join(await mkdtemp(join(tmpdir(), 'tidemark-keys-')), 'db-backup.keys');
  const k1 = randomBytes(32).toString('base64');
  await writeFile(keys, `k1:${k1}\n`, { mode: 0o600 });
  const s = await scenario('file', 'localDestination', '$DIR', { file: keys });
  try {
    const rows = await backUp(s, FIRST);
    // A new key put in front in the file (lines this time): read at the next use, k1's backup still verifies.
    await writeFile(keys, `k2:${randomBytes(32).toString('base64')}\nk1:${k1}\n`);
    ok(await sh(B.restore, s.env), 'restore with the key file');
    assert.deepEqual(await rowsOf(s.restoreUrl), rows, 'restored row by row');
  } finally {
    await endScenario(s);
    await rm(keys, { force: true });
  }
});

test('every sh block of docs/restore.md was run, and every check verify printed is explained there', () => {
  assert.deepEqual(
    blocks.filter((b) => !ran.has(b)),
    [],
  );
  const table = section.slice(section.indexOf('\n## When verify fails\n'));
  const documented = [...table.matchAll(/^\| `([a-z0-9-]+)` \|/gm)].map((m) => m[1]!);
  // Passing and failing verifications, plain and encrypted, name every documented check between them.
  assert.deepEqual([...new Set(checkRuns.flat())].sort(), [...documented].sort());
  for (const run of checkRuns)
    assert.deepEqual(
      documented.filter((c) => run.includes(c)),
      run,
      'the table lists the checks in the order verify prints them',
    );
});
