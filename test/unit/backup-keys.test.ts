// A backup job's keys: from an environment variable or a file, the first encrypts, every key
// decrypts; each error names where the keys come from and the fix, never a key.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { backupKeys } from '../../jobs/backup/keys.js';

const k = () => randomBytes(32).toString('base64');

test('from the environment: the first key encrypts, all decrypt', () => {
  const [a, b] = [k(), k()];
  const keys = backupKeys('db-backup', { env: 'BK' }, { BK: `k2:${a},k1:${b}` });
  assert.equal(keys.current.id, 'k2');
  assert.deepEqual([...keys.byId.keys()], ['k2', 'k1']);
  assert.equal(keys.byId.get('k1')!.key.toString('base64'), b);
});

test('an unset variable names it, the job, and how to make a key', () => {
  assert.throws(
    () => backupKeys('db-backup', { env: 'BK' }, {}),
    /environment variable BK: is not set, and job db-backup encrypts its backups.*openssl rand -base64 32/,
  );
});

test('from a file, one key a line; a file that cannot be read or holds a bad key is named, the key never', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'tm-keys-'));
  const file = join(dir, 'db-backup.keys');
  const [a, b] = [k(), k()];
  await writeFile(file, `k2:${a}\nk1:${b}\n`, { mode: 0o600 });
  assert.equal(backupKeys('db-backup', { file }).current.id, 'k2');
  assert.throws(
    () => backupKeys('db-backup', { file: join(dir, 'missing') }),
    /key file .*missing of job db-backup: cannot be read \(ENOENT\)/,
  );
  const short = randomBytes(16).toString('base64');
  await writeFile(file, `k3:${short}\n`);
  assert.throws(
    () => backupKeys('db-backup', { file }),
    (err: Error) => {
      assert.match(err.message, /key file .* of job db-backup: key "k3" is 16 bytes; AES-256 needs 32 bytes/);
      assert.ok(!err.message.includes(short), 'the key is not printed');
      assert.ok(!err.message.startsWith('environment variable'), 'a file is not called a variable');
      return true;
    },
  );
});
