// `tidemark backups` under attack: two restores (or drills) into one database, a file that appears
// while --to-file writes, an old backup (no key id) after a key rotation, verify naming the check that
// failed, an input that ends late. Each runs the job's handler and the CLI command as
// backups-cli.test.ts does.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { localDestination, type Destination } from '../../jobs/backup/destination.js';
import { startDump } from '../../jobs/backup/pg.js';
import { defineCatalog } from '../../schedules/define.js';
import { BackupFixture, rows } from '../helpers/backups.js';
import { type TestDb } from '../helpers/db.js';

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
  const tables = () => rows(existing, `select count(*)::int as n from pg_tables where schemaname = 'public'`);
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
  await sql`insert into items values (1000, 'after the first backup')`.execute(source.db);
  await backUp(catalog, 'rv-late', 1);
  await sql`delete from items where id = 1000`.execute(source.db);
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
