// `tidemark backups`: list, verify, restore (into a database, into a file) and the drill, against
// backups the real job wrote (its handler run in a ledger transaction) in a directory, plain and
// encrypted, across a key rotation; and every way a backup can be wrong failing loudly, changing
// nothing in the target. Then the commands at their edges: two restores (or drills) into one
// database, a file that appears while --to-file writes, an old backup after a key rotation, verify
// naming the check that failed, an input that ends late.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../../../config/env.js';
import { type BackupOptions } from '../../../../jobs/backup/index.js';
import { defineCatalog } from '../../../../schedules/define.js';
import { localDestination, type Destination } from '../../../../jobs/backup/destination.js';
import { startDump } from '../../../../jobs/backup/pg.js';
import { BackupFixture, rows } from '../../../helpers/backups.js';
import { createTestDb, type TestDb } from '../../../helpers/db.js';

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
  assert.deepEqual(b!.tableCounts, { 'public.items': 300 });
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
  await sql`insert into public.items values (301, 'after the rotation')`.execute(source.db);
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
  assert.match(ok.lines.join('\n'), /public\.items: (\d+) restored, \1 at dump/);
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
  destination: localDestination(${JSON.stringify(join(dir, 'bk-tty'))}), retention: { daily: 3, weekly: 0, monthly: 0 }, tables: ['public.items'] })];
`,
  );
  const { loadCatalog } = await import('../../../../config/catalog-source.js');
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
    await sql`create table public.items (id int primary key, label text not null)`.execute(big.db);
    await sql`insert into public.items select n, md5(n::text) || md5((n * 3)::text) from generate_series(1, 60000) n`.execute(
      big.db,
    );
    const catalog = defineCatalog([backupJob('bk-int', { database: big.url })]);
    await backUp(catalog, 'bk-int', 0);
    const { backupJobOf } = await import('../../../../jobs/backup/registry.js');
    const { listBackups } = await import('../../../../jobs/backup/listing.js');
    const { restoreBackup } = await import('../../../../jobs/backup/restore.js');
    const { writePlainDump } = await import('../../../../jobs/backup/plain-dump.js');
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

// Two restores (or drills) into one database, a file that appears while --to-file writes, an old
// backup (no key id) after a key rotation, verify naming the check that failed, an input that ends
// late. On a fixture of their own; each runs the job's handler and the CLI command as the tests above.
describe('two restores or drills at once, a file appearing meanwhile, an old key, the check that failed', () => {
  const fx = new BackupFixture();
  let ledger: TestDb;
  let source: TestDb;
  let dir: string;
  before(async () => {
    await fx.start('tm-backups-review');
    ({ ledger, source, dir } = fx);
  });
  after(() => fx.stop());
  const { sibling, backupJob, backUp, cli } = fx;

  /** A directory destination whose next read() waits at a gate: the test acts while a restore is under way. */
  function gated(root: string) {
    const inner = localDestination(root);
    let gate: { reached: () => void; release: Promise<void> } | undefined;
    const destination: Destination = {
      ...inner,
      read: async (key) => {
        const g = gate;
        gate = undefined;
        if (g) {
          g.reached();
          await g.release;
        }
        return inner.read(key);
      },
    };
    return {
      destination,
      /** Arms the gate; resolves `reached` once a read() waits at it, which waits until `release()`. */
      arm() {
        let release!: () => void;
        let reached!: () => void;
        const atGate = new Promise<void>((r) => (reached = r));
        gate = { reached, release: new Promise<void>((r) => (release = r)) };
        return { atGate, release };
      },
    };
  }

  test('two restores into the same new database: the one that created it never drops the other one’s restore', async () => {
    const g = gated(join(dir, 'rv-twice'));
    const catalog = defineCatalog([backupJob('rv-twice', { destination: g.destination })]);
    await backUp(catalog, 'rv-twice', 0);
    const into = sibling('twice');
    const { atGate, release } = g.arm();
    // A creates the database, then waits at the read of the backup.
    const a = cli(catalog, ['restore', 'rv-twice', '--latest', '--into', into]).catch((err: Error) => err);
    await atGate;
    const b = await cli(catalog, ['restore', 'rv-twice', '--latest', '--into', into]).catch(
      (err: Error) => err,
    );
    release();
    const ra = await a;
    const ok = (r: typeof b | typeof ra) => !(r instanceof Error) && r.code === 0;
    assert.ok(ok(ra) || ok(b), `one of them restores: ${String(ra instanceof Error ? ra : ra.lines)}`);
    assert.deepEqual(await rows(into), await rows(source.url), 'what was reported restored is there');
    if (b instanceof Error) assert.match(b.message, /another restore/);
  });

  test('--to-file never overwrites a file that appears while the backup is being written', async () => {
    const g = gated(join(dir, 'rv-file'));
    const catalog = defineCatalog([backupJob('rv-file', { destination: g.destination })]);
    await backUp(catalog, 'rv-file', 0);
    const file = join(dir, 'appears.dump');
    const { atGate, release } = g.arm();
    const w = cli(catalog, ['restore', 'rv-file', '--latest', '--to-file', file]).catch((err: Error) => err);
    await atGate;
    await writeFile(file, 'precious, written by someone else');
    release();
    const r = await w;
    assert.ok(r instanceof Error, 'the restore to a file that now exists fails');
    assert.match(r.message, /exists/);
    assert.equal(await readFile(file, 'utf8'), 'precious, written by someone else');
  });

  test('a backup written before key ids still decrypts after a rotation put a new key first', async () => {
    const k = randomBytes(32);
    process.env.TM_TEST_RV_LEGACY = `old:${k.toString('base64')}`;
    const catalog = defineCatalog([backupJob('rv-legacy', { encryption: { env: 'TM_TEST_RV_LEGACY' } })]);
    await backUp(catalog, 'rv-legacy', 0);
    const [b] = (await cli(catalog, ['list', 'rv-legacy'])).json as unknown as {
      location: string;
      windowKey: string;
    }[];
    // The old format (IV first, no header), as encryptionKey wrote it with what is now key "old".
    const { createCipheriv, createHash } = await import('node:crypto');
    const plain = Buffer.concat(await startDump(source.url).stream.toArray());
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', k, iv);
    const old = Buffer.concat([iv, c.update(plain), c.final(), c.getAuthTag()]);
    await writeFile(b!.location, old);
    await ledger.db
      .updateTable('backups')
      .set({ sha256: createHash('sha256').update(old).digest('hex'), bytes: old.length, key_id: null })
      .where('window_key', '=', b!.windowKey)
      .execute();
    process.env.TM_TEST_RV_LEGACY = `new:${randomBytes(32).toString('base64')},old:${k.toString('base64')}`;
    const v = await cli(catalog, ['verify', 'rv-legacy']);
    assert.equal(v.code, 0, v.lines.join('\n'));
    const into = sibling('legacy_rotated');
    const r = await cli(catalog, ['restore', 'rv-legacy', '--latest', '--into', into]);
    assert.equal(r.code, 0, r.lines.join('\n'));
    assert.deepEqual(await rows(into), await rows(source.url));
  });

  test('verify names the check that failed: a truncated backup whose key is gone fails size, a changed header fails sha256', async () => {
    const k1 = `k1:${randomBytes(32).toString('base64')}`;
    process.env.TM_TEST_RV_CHECKS = k1;
    const catalog = defineCatalog([backupJob('rv-checks', { encryption: { env: 'TM_TEST_RV_CHECKS' } })]);
    for (const n of [0, 1, 2]) await backUp(catalog, 'rv-checks', n);
    const list = (await cli(catalog, ['list', 'rv-checks'])).json as unknown as {
      location: string;
      windowKey: string;
      bytes: number;
    }[];
    const checks = async (windowKey: string) => {
      const v = await cli(catalog, ['verify', 'rv-checks', '--key', windowKey]);
      assert.equal(v.code, 1, v.lines.join('\n'));
      return (v.json.checks as { name: string; ok: boolean }[]).map((c) => `${c.name}:${c.ok}`);
    };
    // 100 bytes cut off, and k1 no longer in the list: the size is what is wrong with the object.
    await writeFile(list[0]!.location, (await readFile(list[0]!.location)).subarray(0, list[0]!.bytes - 100));
    process.env.TM_TEST_RV_CHECKS = `k2:${randomBytes(32).toString('base64')}`;
    assert.deepEqual(await checks(list[0]!.windowKey), ['read:true', 'size:false']);
    process.env.TM_TEST_RV_CHECKS = k1;
    // The header's key id (k1 -> k9) and its version byte changed: the stored bytes are not the written ones.
    for (const [b, at, value] of [
      [list[1]!, 7, '9'.charCodeAt(0)],
      [list[2]!, 4, 2],
    ] as const) {
      const bytes = await readFile(b.location);
      bytes[at] = value;
      await writeFile(b.location, bytes);
      assert.deepEqual(await checks(b.windowKey), ['read:true', 'size:true', 'sha256:false']);
    }
    // The key alone missing from an intact backup: size and sha256 passed, the key check names it.
    process.env.TM_TEST_RV_CHECKS = `k3:${randomBytes(32).toString('base64')}`;
    await backUp(catalog, 'rv-checks', 3);
    process.env.TM_TEST_RV_CHECKS = `k2:${randomBytes(32).toString('base64')}`;
    assert.deepEqual(await checks('rv-checks/2026-10-04T00:00:00Z'), [
      'read:true',
      'size:true',
      'sha256:true',
      'key:false',
    ]);
  });

  test("a window's drill while an on-demand drill runs: neither drops the other's scratch database", async () => {
    const g = gated(join(dir, 'rv-drills'));
    const scratch = sibling('drills_scratch');
    const catalog = defineCatalog([
      backupJob('rv-drills', {
        destination: g.destination,
        restoreCheck: { every: 1, scratchDatabaseUrl: scratch },
      }),
    ]);
    await backUp(catalog, 'rv-drills', 0);
    const { atGate, release } = g.arm();
    // The on-demand drill has made its scratch database and waits at the read of the backup.
    const onDemand = cli(catalog, ['drill', 'rv-drills']);
    await atGate;
    let settled = false;
    const window = backUp(catalog, 'rv-drills', 1).then(
      () => (settled = true),
      (err: Error) => ((settled = true), err),
    );
    // The window's drill either ran through, or waits for the on-demand one (an advisory lock).
    for (;;) {
      if (settled) break;
      const waiting = await rows(
        ledger.url,
        `select 1 from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory'
         and query like '%pg_advisory_lock(hashtext%'`,
      );
      if (waiting.length) break;
    }
    release();
    const [d, w] = await Promise.all([onDemand, window]);
    assert.equal(w, true, `the window's drill passed: ${String(w)}`);
    assert.equal(d.code, 0, d.lines.join('\n'));
  });

  test('verify of an encrypted backup whose key variable is unset fails the key check, after size and sha256', async () => {
    process.env.TM_TEST_RV_UNSET = `k1:${randomBytes(32).toString('base64')}`;
    const catalog = defineCatalog([backupJob('rv-unset', { encryption: { env: 'TM_TEST_RV_UNSET' } })]);
    await backUp(catalog, 'rv-unset', 0);
    delete process.env.TM_TEST_RV_UNSET;
    const v = await cli(catalog, ['verify', 'rv-unset']);
    assert.equal(v.code, 1);
    const checks = v.json.checks as { name: string; ok: boolean; detail: string }[];
    assert.deepEqual(
      checks.map((c) => `${c.name}:${c.ok}`),
      ['read:true', 'size:true', 'sha256:true', 'key:false'],
    );
    assert.match(checks.at(-1)!.detail, /TM_TEST_RV_UNSET: is not set/);
  });

  /** pg_restore children of this process that wait for more input (blocked reading their stdin). */
  async function pgRestoreWaitingForInput(): Promise<boolean> {
    const { readdir, readFile: read } = await import('node:fs/promises');
    for (const pid of await readdir('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      const stat = await read(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat);
      if (!m || m[1] !== 'pg_restore' || Number(m[2]) !== process.pid) continue;
      // read(2) on fd 0: "0 0x0 ..." in /proc/<pid>/syscall.
      if ((await read(`/proc/${pid}/syscall`, 'utf8').catch(() => '')).startsWith('0 0x0 ')) return true;
    }
    return false;
  }

  test('a restore has committed nothing while its input has not ended: pg_restore never has the whole archive before the checks', async () => {
    const inner = localDestination(join(dir, 'rv-late'));
    const existing = sibling('late');
    const tables = () =>
      rows(existing, `select count(*)::int as n from pg_tables where schemaname = 'public'`);
    // A destination whose stream has delivered every byte and then ends late (a slow network, a
    // server that closes the response after a pause): it ends once the target holds a committed
    // table, or pg_restore waits for more input.
    const destination: Destination = {
      ...inner,
      read: async (key) => {
        const bytes = await readFile(join(dir, 'rv-late', key));
        const { Readable } = await import('node:stream');
        let pushed = false;
        return new Readable({
          read() {
            if (pushed) return;
            pushed = true;
            this.push(bytes);
            void (async () => {
              for (;;) {
                if (await pgRestoreWaitingForInput()) break;
                if (((await tables())[0] as { n: number }).n > 0) break;
              }
              this.push(null);
            })();
          },
        });
      },
    };
    const catalog = defineCatalog([backupJob('rv-late', { destination })]);
    await backUp(catalog, 'rv-late', 0);
    await sql`insert into public.items values (1000, 'after the first backup')`.execute(source.db);
    await backUp(catalog, 'rv-late', 1);
    await sql`delete from public.items where id = 1000`.execute(source.db);
    const list = (await cli(catalog, ['list', 'rv-late'])).json as unknown as {
      windowKey: string;
      location: string;
    }[];
    // The older backup's object replaced by the newer one (a valid archive, another size).
    await writeFile(list[1]!.location, await readFile(list[0]!.location));
    const admin = new pg.Client({ connectionString: ledger.url });
    await admin.connect();
    await admin.query(`create database ${pg.escapeIdentifier(new URL(existing).pathname.slice(1))}`);
    await admin.end();
    const r = await cli(catalog, ['restore', 'rv-late', '--key', list[1]!.windowKey, '--into', existing]);
    assert.equal(r.code, 1, r.lines.join('\n'));
    assert.match(String(r.json.problem), /size check failed.*rolled back/);
    assert.deepEqual(await tables(), [{ n: 0 }], 'nothing of the replaced object is in the target');
  });
});
