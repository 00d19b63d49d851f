// The CLI's kept sign-in (cli/login.ts) against a hostile file system: the token is written only
// to a file of this user's own, mode 0600 from its creation, in a directory nobody else may write;
// a planted link or file is refused, never followed, and never receives the token.
import assert from 'node:assert/strict';
import { chmod, chown, lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { readLogin, writeLogin, type Login } from '../../cli/login.js';

const root = await mkdtemp(join(tmpdir(), 'tm-cli-login-'));
after(() => rm(root, { recursive: true, force: true }));

const login: Login = {
  web: 'https://tidemark.example.com',
  token: 'tmk_abcdefghijkl_SECRET-OF-THE-TEST-0123456789abcdefghijklmno',
  id: 'abcdefghijkl',
  name: 'alice',
  displayName: 'Alice',
  roles: ['viewer', 'operator'],
  expiresAt: '2999-01-01T00:00:00.000Z',
};
let n = 0;
const place = async (mode = 0o700) => {
  const dir = join(root, `d${n++}`);
  await mkdir(dir, { mode });
  await chmod(dir, mode);
  return { dir, file: join(dir, 'login.json') };
};

test('kept in a file of mode 0600 in a directory of mode 0700, and read back', async () => {
  const file = join(root, 'fresh', 'tidemark', 'login.json');
  await writeLogin(login, file);
  assert.equal((await lstat(file)).mode & 0o777, 0o600);
  assert.equal((await lstat(join(root, 'fresh', 'tidemark'))).mode & 0o777, 0o700);
  assert.deepEqual(await readLogin(file), login);
  // Written again over the old: still one file, still 0600, nothing left beside it.
  await writeLogin({ ...login, name: 'alice2' }, file);
  assert.equal((await readLogin(file))?.name, 'alice2');
});

test('a link planted where the sign-in goes is refused, and its target never gets the token', async () => {
  const { dir, file } = await place();
  const loot = join(root, `loot-${n}`);
  await writeFile(loot, '', { mode: 0o666 });
  await symlink(loot, file);
  await assert.rejects(writeLogin(login, file), /is a symbolic link/);
  await assert.rejects(readLogin(file), /is a symbolic link/);
  assert.equal(await readFile(loot, 'utf8'), '');
  // The old guessable temporary names, planted: not followed either.
  for (let pid = process.pid - 5; pid <= process.pid + 5; pid++) await symlink(loot, `${file}.${pid}.part`);
  await rm(file);
  await writeLogin(login, file);
  assert.equal(await readFile(loot, 'utf8'), '');
  assert.deepEqual(await readLogin(file), login);
  void dir;
});

test('a directory others may write is refused for writing and for reading', async () => {
  const { dir, file } = await place(0o1777);
  await assert.rejects(writeLogin(login, file), /may be written by others \(mode 777\).*chmod 700/);
  await chmod(dir, 0o700);
  await writeLogin(login, file);
  await chmod(dir, 0o777);
  await assert.rejects(readLogin(file), /may be written by others/);
});

test("a file others may read, or another user's, is refused, not used", async () => {
  const { file } = await place();
  await writeLogin(login, file);
  await chmod(file, 0o644);
  await assert.rejects(readLogin(file), /may be read by others \(mode 644\).*chmod 600/);
  await chmod(file, 0o600);
  if (process.getuid?.() === 0) {
    await chown(file, 65534, 65534);
    await assert.rejects(readLogin(file), /belongs to another user \(uid 65534\)/);
  }
});
