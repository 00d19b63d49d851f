// `tidemark backups`: list, verify, restore (into a database, into a file) and the drill, against
// backups the real job wrote (its handler run in a ledger transaction) in a directory, plain and
// encrypted, across a key rotation; and every way a backup can be wrong failing loudly, changing
// nothing in the target.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../config/env.js';
import { type BackupOptions } from '../../jobs/backup/index.js';
import { defineCatalog } from '../../schedules/define.js';
import { BackupFixture, rows } from '../helpers/backups.js';
import { createTestDb, type TestDb } from '../helpers/db.js';

const fx = new BackupFixture();
let ledger: TestDb;
let source: TestDb;
let dir: string;
before(async () => {
  await fx.start('tm-backups');
  ({ ledger, source, dir } = fx);
});
after(() => fx.stop());
const { sibling, backupJob, backUp, cli } = fx;
const key = () => randomBytes(32).toString('base64');

async function tableCount(url: string): Promise<number> {
  const r = await rows(url, `select count(*)::int as n from pg_tables where schemaname = 'public'`);
  return (r[0] as { n: number }).n;
}

async function flipByte(file: string, at: number): Promise<void> {
  const b = await readFile(file);
  b[at] = b[at]! ^ 0xff;
  await writeFile(file, b);
}

test('list, verify and restore a plain backup into a new database, row for row', async () => {
  const catalog = defineCatalog([backupJob('bk-plain')]);
  await backUp(catalog, 'bk-plain', 0);
  const list = await cli(catalog, ['list', 'bk-plain']);
  const [b] = list.json as unknown as Record<string, unknown>[];
  assert.equal(b!.windowKey, 'bk-plain/2026-10-01T00:00:00Z');
  assert.equal(b!.encrypted, false);
  assert.deepEqual(b!.tableCounts, { items: 300 });
  assert.match(String(b!.location), /bk-plain\/20261001T000000Z\.dump$/);
  assert.equal(b!.lastVerification, null);

  const v = await cli(catalog, ['verify', 'bk-plain']);
  assert.equal(v.code, 0, v.lines.join('\n'));
  assert.deepEqual(
    (v.json.checks as { name: string; ok: boolean }[]).map((c) => `${c.name}:${c.ok}`),
    ['read:true', 'size:true', 'sha256:true', 'toc:true', 'tables:true'],
  );
  const listed = (await cli(catalog, ['list', 'bk-plain'])).json as unknown as {
    lastVerification: { ok: boolean };
  }[];
  assert.equal(listed[0]!.lastVerification.ok, true);

  const into = sibling('plain_restored');
  const r = await cli(catalog, ['restore', 'bk-plain', '--latest', '--into', into]);
  assert.equal(r.code, 0, r.lines.join('\n'));
  assert.equal(r.json.created, true);
  assert.deepEqual(await rows(into), await rows(source.url));

  // The same target again: not empty, refused unless --clean, which restores over it.
  await assert.rejects(
    cli(catalog, ['restore', 'bk-plain', '--latest', '--into', into]),
    /not empty.*--clean/,
  );
  const again = await cli(catalog, ['restore', 'bk-plain', '--latest', '--into', into, '--clean']);
  assert.equal(again.code, 0, again.lines.join('\n'));
  assert.deepEqual(await rows(into), await rows(source.url));

  // The job's own source: refused, naming the flag.
  await assert.rejects(
    cli(catalog, ['restore', 'bk-plain', '--latest', '--into', source.url, '--clean']),
    /is the database job bk-plain backs up.*--overwrite-source/,
  );
  // tidemark's own ledger (DATABASE_URL), even with --clean.
  await assert.rejects(
    cli(catalog, ['restore', 'bk-plain', '--latest', '--into', ledger.url, '--clean']),
    /is tidemark's own ledger \(DATABASE_URL\)/,
  );
  const viaLocalhost = new URL(source.url);
  viaLocalhost.hostname = 'localhost';
  await assert.rejects(
    cli(catalog, ['restore', 'bk-plain', '--latest', '--into', viaLocalhost.toString(), '--clean']),
    /backs up/,
  );
});

test('a corrupted backup fails verify naming sha256, and its restore changes nothing', async () => {
  const catalog = defineCatalog([backupJob('bk-bad')]);
  await backUp(catalog, 'bk-bad', 0);
  const [b] = (await cli(catalog, ['list', 'bk-bad'])).json as unknown as {
    location: string;
    bytes: number;
  }[];
  // Near the end: pg_restore has read (and, restoring, applied) nearly all of it when the check fails.
  await flipByte(b!.location, b!.bytes - 40);
  const v = await cli(catalog, ['verify', 'bk-bad']);
  assert.equal(v.code, 1);
  assert.match(v.lines.join('\n'), /FAILED sha256 +sha256 [0-9a-f]{64} stored, [0-9a-f]{64} recorded/);

  // Into a new database: dropped again. Into an existing empty one: rolled back, still empty.
  const fresh = sibling('bad_new');
  const r1 = await cli(catalog, ['restore', 'bk-bad', '--latest', '--into', fresh]);
  assert.equal(r1.code, 1);
  assert.match(String(r1.json.problem), /sha256 check failed.*was dropped again/);
  const admin = new pg.Client({ connectionString: ledger.url });
  await admin.connect();
  const exists = await admin.query('select 1 from pg_database where datname = $1', [
    new URL(fresh).pathname.slice(1),
  ]);
  assert.equal(exists.rowCount, 0);
  const existing = sibling('bad_existing');
  await admin.query(`create database ${pg.escapeIdentifier(new URL(existing).pathname.slice(1))}`);
  await admin.end();
  const r2 = await cli(catalog, ['restore', 'bk-bad', '--latest', '--into', existing]);
  assert.equal(r2.code, 1);
  assert.match(String(r2.json.problem), /rolled back/);
  assert.equal(await tableCount(existing), 0, 'nothing of the backup is left in the target');
  const file = join(dir, 'bad.dump');
  await assert.rejects(cli(catalog, ['restore', 'bk-bad', '--latest', '--to-file', file]), /sha256/);
  await assert.rejects(stat(file), { code: 'ENOENT' });
});

test('encrypted: key ids in the backup, rotation keeps old backups restorable, a changed byte fails the GCM tag', async () => {
  const k1 = `k1:${key()}`;
  const k2 = `k2:${key()}`;
  process.env.TM_TEST_BK_KEYS = k1;
  const catalog = defineCatalog([backupJob('bk-enc', { encryption: { env: 'TM_TEST_BK_KEYS' } })]);
  await backUp(catalog, 'bk-enc', 0);
  process.env.TM_TEST_BK_KEYS = `${k2},${k1}`; // rotated: k2 encrypts, k1 still decrypts
  await sql`insert into items values (301, 'after the rotation')`.execute(source.db);
  await backUp(catalog, 'bk-enc', 1);
  const list = (await cli(catalog, ['list', 'bk-enc'])).json as unknown as {
    keyId: string;
    windowKey: string;
  }[];
  assert.deepEqual(
    list.map((b) => b.keyId),
    ['k2', 'k1'],
  );
  for (const b of list) {
    const into = sibling(`enc_${b.keyId}`);
    const r = await cli(catalog, ['restore', 'bk-enc', '--key', b.windowKey, '--into', into]);
    assert.equal(r.code, 0, r.lines.join('\n'));
    assert.equal((await rows(into)).length, b.keyId === 'k2' ? 301 : 300);
  }
  // A plain file for other tools: pg_restore reads it without tidemark.
  const file = join(dir, 'k1.dump');
  const f = await cli(catalog, ['restore', 'bk-enc', '--key', list[1]!.windowKey, '--to-file', file]);
  assert.equal(f.code, 0);
  assert.equal((await stat(file)).mode & 0o777, 0o600);
  const toc = spawnSync('pg_restore', ['--list', file], { encoding: 'utf8' });
  assert.equal(toc.status, 0, toc.stderr);
  assert.match(toc.stdout, /TABLE DATA public items/);
  await assert.rejects(
    cli(catalog, ['restore', 'bk-enc', '--latest', '--to-file', file]),
    /exists; name a new file/,
  );

  // k1 dropped from the list: the old backup names the key it needs.
  process.env.TM_TEST_BK_KEYS = k2;
  const v = await cli(catalog, ['verify', 'bk-enc', '--key', list[1]!.windowKey]);
  assert.equal(v.code, 1);
  assert.match(v.lines.join('\n'), /key id "k1", which environment variable TM_TEST_BK_KEYS does not hold/);
  assert.doesNotMatch(v.lines.join('\n'), new RegExp(k2.slice(3, 20).replace(/[+/]/g, '.')));

  // A changed byte inside the ciphertext, with the record's checksum made to match: the tag catches it.
  const b = (await cli(catalog, ['list', 'bk-enc'])).json as unknown as {
    location: string;
    windowKey: string;
    bytes: number;
  }[];
  await flipByte(b[0]!.location, Math.floor(b[0]!.bytes / 2));
  const { createHash } = await import('node:crypto');
  const sha = createHash('sha256')
    .update(await readFile(b[0]!.location))
    .digest('hex');
  await ledger.db
    .updateTable('backups')
    .set({ sha256: sha })
    .where('window_key', '=', b[0]!.windowKey)
    .execute();
  const t = await cli(catalog, ['verify', 'bk-enc', '--key', b[0]!.windowKey]);
  assert.equal(t.code, 1);
  assert.match(t.lines.join('\n'), /FAILED gcm-tag/);
  const existing = sibling('enc_tampered');
  await cli(catalog, ['restore', 'bk-enc', '--key', b[0]!.windowKey, '--into', existing]).then((r) => {
    assert.equal(r.code, 1);
    assert.match(String(r.json.problem), /gcm-tag check failed/);
  });
  const left = await rows(
    ledger.url,
    `select datname from pg_database where datname = '${new URL(existing).pathname.slice(1)}'`,
  );
  assert.deepEqual(left, [], 'the database the failed restore created is dropped');
});

test('the drill on demand: passes and is recorded; a broken newest backup fails it and opens an incident', async () => {
  const scratch = sibling('drill_scratch');
  const catalog = defineCatalog([
    backupJob('bk-drill', { restoreCheck: { every: 1000, scratchDatabaseUrl: scratch } }),
  ]);
  await backUp(catalog, 'bk-drill', 0);
  const ok = await cli(catalog, ['drill', 'bk-drill']);
  assert.equal(ok.code, 0, ok.lines.join('\n'));
  assert.match(ok.lines.join('\n'), /items: (\d+) restored, \1 at dump/);
  const dbs = await rows(
    ledger.url,
    `select datname from pg_database where datname = '${new URL(scratch).pathname.slice(1)}'`,
  );
  assert.deepEqual(dbs, [], 'the scratch database is dropped');
  const [b] = (await cli(catalog, ['list', 'bk-drill'])).json as unknown as {
    location: string;
    bytes: number;
  }[];
  await flipByte(b!.location, 100);
  const bad = await cli(catalog, ['drill', 'bk-drill']);
  assert.equal(bad.code, 1);
  const incident = await ledger.db
    .selectFrom('incidents')
    .selectAll()
    .where('job', '=', 'bk-drill')
    .where('closed_at', 'is', null)
    .executeTakeFirstOrThrow();
  assert.equal(incident.kind, 'restore-drill-failed');
  const drills = await ledger.db
    .selectFrom('backup_checks')
    .select(['ok', 'trigger'])
    .where('job', '=', 'bk-drill')
    .where('kind', '=', 'drill')
    .orderBy('at')
    .execute();
  assert.deepEqual(drills, [
    { ok: true, trigger: 'schedule' }, // the window's own drill: the first window of the grid
    { ok: true, trigger: 'cli' },
    { ok: false, trigger: 'cli' },
  ]);
});

test('progress is one redrawn line on a terminal, and absent otherwise', async () => {
  const catalogFile = join(dir, 'tty-catalog.ts');
  const backupIndex = join(process.cwd(), 'jobs/backup/index.js');
  const destination = join(process.cwd(), 'jobs/backup/destination.js');
  await writeFile(
    catalogFile,
    `import { databaseBackup } from ${JSON.stringify(backupIndex)};
import { localDestination } from ${JSON.stringify(destination)};
export default [databaseBackup({ name: 'bk-tty', grid: 'day', timezone: 'UTC', database: ${JSON.stringify(source.url)},
  destination: localDestination(${JSON.stringify(join(dir, 'bk-tty'))}), retention: { daily: 3, weekly: 0, monthly: 0 }, tables: ['items'] })];
`,
  );
  const { loadCatalog } = await import('../../config/catalog-source.js');
  const catalog = await loadCatalog({ ...loadConfig(), DATABASE_URL: ledger.url }, { flag: catalogFile });
  await backUp(catalog, 'bk-tty', 0);
  const env = { ...process.env, DATABASE_URL: ledger.url, TIDEMARK_CATALOG: catalogFile };
  const cmd = `node bin/tidemark.js backups verify bk-tty`;
  // `script` gives the command a terminal (a pty) and copies what it wrote.
  const onTty = spawnSync('script', ['-qec', cmd, '/dev/null'], { env, encoding: 'utf8' });
  assert.equal(onTty.status, 0, onTty.stdout + onTty.stderr);
  assert.match(onTty.stdout, /\rverifying bk-tty\/2026-10-01T00:00:00Z: 100% \(\d/);
  assert.match(onTty.stdout, /ok: bk-tty bk-tty\/2026-10-01T00:00:00Z/);
  const piped = spawnSync('node', ['bin/tidemark.js', 'backups', 'verify', 'bk-tty'], {
    env,
    encoding: 'utf8',
  });
  assert.equal(piped.status, 0, piped.stderr);
  assert.doesNotMatch(piped.stdout + piped.stderr, /%/);
});

test("a drill whose scratch database is the job's source is refused, the source untouched", async () => {
  // The same database under another spelling (localhost for 127.0.0.1): the catalog accepts it,
  // the drill finds out before it drops anything.
  const same = new URL(source.url);
  same.hostname = 'localhost';
  const catalog = defineCatalog([
    backupJob('bk-self', { restoreCheck: { every: 1000, scratchDatabaseUrl: same.toString() } }),
  ]);
  await backUp(catalog, 'bk-self', 1); // not a drill window (every 1000 from day 0)
  await assert.rejects(
    cli(catalog, ['drill', 'bk-self']),
    /scratch database .* is the database job bk-self backs up/,
  );
  assert.equal((await rows(source.url)).length >= 300, true, 'the source still has its rows');
  // A window's drill refuses it as well, and publishes nothing.
  await assert.rejects(
    backUp(catalog, 'bk-self', 0),
    /scratch database .* is the database job bk-self backs up/,
  );
  assert.equal((await rows(source.url)).length >= 300, true);
});

test("a drill whose scratch database is tidemark's own ledger is refused, on demand and in a window", async () => {
  const viaLocalhost = new URL(ledger.url);
  viaLocalhost.hostname = 'localhost';
  const catalog = defineCatalog([
    backupJob('bk-ledger', { restoreCheck: { every: 1000, scratchDatabaseUrl: viaLocalhost.toString() } }),
  ]);
  await backUp(catalog, 'bk-ledger', 1); // not a drill window
  await assert.rejects(cli(catalog, ['drill', 'bk-ledger']), /scratch database .* is tidemark's own ledger/);
  await assert.rejects(backUp(catalog, 'bk-ledger', 0), /scratch database .* is tidemark's own ledger/);
  // Still there: the ledger answers with the backup of day 1.
  const left = await ledger.db
    .selectFrom('backups')
    .select('window_key')
    .where('job', '=', 'bk-ledger')
    .execute();
  assert.deepEqual(left, [{ window_key: 'bk-ledger/2026-10-02T00:00:00Z' }]);
});

test('an interrupted restore (Ctrl-C) stops pg_restore, drops the database it created, and says so', async () => {
  // Big enough to arrive in many chunks: the interruption comes after the first.
  const big = await createTestDb({ migrated: false });
  try {
    await sql`create table items (id int primary key, label text not null)`.execute(big.db);
    await sql`insert into items select n, md5(n::text) || md5((n * 3)::text) from generate_series(1, 60000) n`.execute(
      big.db,
    );
    const catalog = defineCatalog([backupJob('bk-int', { database: big.url })]);
    await backUp(catalog, 'bk-int', 0);
    const { backupJobOf } = await import('../../jobs/backup/registry.js');
    const { listBackups } = await import('../../jobs/backup/listing.js');
    const { restoreBackup } = await import('../../jobs/backup/restore.js');
    const { writePlainDump } = await import('../../jobs/backup/plain-dump.js');
    const bj = backupJobOf(catalog.get('bk-int'))!;
    const [rec] = await listBackups(ledger.db, 'bk-int');
    assert.ok(rec!.bytes > 512 * 1024, `${rec!.bytes} bytes: several chunks`);
    const into = sibling('interrupted');
    const ac = new AbortController();
    const report = await restoreBackup(bj, rec!, {
      into,
      signal: ac.signal,
      onProgress: (done) => done > 0 && ac.abort(),
    });
    assert.equal(report.ok, false);
    assert.match(String(report.problem), /interrupted.*was dropped again/);
    const left = await rows(
      ledger.url,
      `select 1 from pg_database where datname = '${new URL(into).pathname.slice(1)}'`,
    );
    assert.deepEqual(left, []);
    const file = join(dir, 'interrupted.dump');
    const ac2 = new AbortController();
    await assert.rejects(
      writePlainDump(bj, rec!, file, (done) => done > 0 && ac2.abort(), ac2.signal),
      /interrupted/,
    );
    await assert.rejects(stat(file), { code: 'ENOENT' });
    const { readdir } = await import('node:fs/promises');
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.startsWith('interrupted')),
      [],
      'no part file left',
    );
  } finally {
    await big.drop();
  }
});

test('a catalog still passing the old encryptionKey is refused, naming its replacement (never silently unencrypted)', () => {
  const old = { encryptionKey: randomBytes(32) } as unknown as Partial<BackupOptions>;
  assert.throws(
    () => backupJob('bk-old', old),
    /job "bk-old": encryptionKey: .*encryption: \{ env: 'VARIABLE' \} or \{ file: '\/path' \}/,
  );
  // Nor a key source that names neither.
  assert.throws(
    () => backupJob('bk-odd', { encryption: {} as never }),
    /job "bk-odd": encryption: .*env.*file/,
  );
});
