// The CLI's sign-in, kept between commands: `tidemark login` stores the page's address and a token
// of the person's own (made by the page through the identity provider's device flow) in a file only
// its owner may read (mode 0600; a file others can read is refused, not used). Signed in, the CLI's
// decisions go through the page, which knows who is deciding and signs it for the workers.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

export interface Login {
  /** The page's address, e.g. https://tidemark.example.com. */
  readonly web: string;
  readonly token: string;
  readonly id: string;
  readonly name: string;
  readonly displayName: string;
  readonly roles: readonly string[];
  readonly expiresAt: string;
}

export class LoginFileError extends Error {
  readonly code = 'LOGIN_FILE';
}

/** Where the sign-in is kept: TIDEMARK_LOGIN_FILE, or tidemark/login.json under the user's config directory. */
export function loginFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.TIDEMARK_LOGIN_FILE) return env.TIDEMARK_LOGIN_FILE;
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'tidemark', 'login.json');
}

const myUid = () => process.getuid?.() ?? -1;

/**
 * A file or directory that only its owner, this user, controls: not a symbolic link (which could
 * point anywhere), owned by this user, and (a directory) writable by nobody else.
 */
async function ownedByMe(path: string, what: 'file' | 'directory'): Promise<void> {
  const info = await lstat(path);
  if (info.isSymbolicLink())
    throw new LoginFileError(
      `${path} is a symbolic link: tidemark keeps its sign-in only in a ${what} of its own; remove it and run npx tidemark login`,
    );
  if (myUid() >= 0 && info.uid !== myUid())
    throw new LoginFileError(
      `${path} belongs to another user (uid ${info.uid}): remove it, or set TIDEMARK_LOGIN_FILE to a place of your own`,
    );
  if (what === 'directory' && (info.mode & 0o022) !== 0)
    throw new LoginFileError(
      `${path} may be written by others (mode ${(info.mode & 0o777).toString(8)}): keep the sign-in in a directory only you can write (chmod 700 ${path}, or set TIDEMARK_LOGIN_FILE)`,
    );
}

/** The kept sign-in; null when there is none or it has expired. Refuses a file others may read. */
export async function readLogin(file = loginFile(), now = new Date()): Promise<Login | null> {
  const info = await lstat(file).catch(() => null);
  if (!info) return null;
  await ownedByMe(file, 'file');
  await ownedByMe(dirname(file), 'directory');
  if ((info.mode & 0o077) !== 0)
    throw new LoginFileError(
      `${file} may be read by others (mode ${(info.mode & 0o777).toString(8)}): it holds a token; run chmod 600 ${file}, or npx tidemark login again`,
    );
  let login: Login;
  try {
    login = JSON.parse(await readFile(file, 'utf8')) as Login;
  } catch (err) {
    throw new LoginFileError(
      `${file} is not a sign-in tidemark wrote (${(err as Error).message}): run npx tidemark login again`,
    );
  }
  if (typeof login.token !== 'string' || typeof login.web !== 'string')
    throw new LoginFileError(`${file} is not a sign-in tidemark wrote: run npx tidemark login again`);
  return new Date(login.expiresAt).getTime() > now.getTime() ? login : null;
}

/**
 * Keeps `login`: written whole (a crash leaves the old file or the new), mode 0600 from its
 * creation, under a name nobody can guess and that must not exist yet (no link is followed), in a
 * directory this user owns and nobody else may write.
 */
export async function writeLogin(login: Login, file = loginFile()): Promise<void> {
  const dir = dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await ownedByMe(dir, 'directory');
  const existing = await lstat(file).catch(() => null);
  if (existing) await ownedByMe(file, 'file');
  const part = join(dir, `.login-${randomBytes(12).toString('hex')}.part`);
  const fh = await open(
    part,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o600,
  );
  try {
    await fh.writeFile(`${JSON.stringify(login, null, 2)}\n`);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(part, file).catch(async (err: Error) => {
    await rm(part, { force: true });
    throw err;
  });
}

export const forgetLogin = (file = loginFile()) => rm(file, { force: true });

/** The kept sign-in as written, whatever its mode (to revoke its token at logout); null when none. */
export async function keptLogin(file = loginFile()): Promise<Login | null> {
  const info = await lstat(file).catch(() => null);
  if (!info?.isFile()) return null;
  try {
    const login = JSON.parse(await readFile(file, 'utf8')) as Login;
    return typeof login.token === 'string' && typeof login.web === 'string' ? login : null;
  } catch {
    return null;
  }
}

/** A call to the page's API as the signed-in person; an error answer is thrown with the page's words. */
export async function asSignedIn<T>(login: Login, path: string, body?: unknown): Promise<T> {
  let r: Response;
  try {
    r = await fetch(new URL(path, login.web), {
      method: body === undefined ? 'GET' : 'POST',
      headers: {
        authorization: `Bearer ${login.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(60_000),
    });
  } catch (err) {
    throw new Error(`the page at ${login.web} could not be reached: ${(err as Error).message}`);
  }
  const answer = (await r.json().catch(() => ({}))) as { error?: string };
  if (r.status === 401)
    throw new Error(
      `the page at ${login.web} no longer takes your sign-in (revoked or expired): run npx tidemark login`,
    );
  if (!r.ok) throw new Error(answer.error ?? `the page answered HTTP ${r.status}`);
  return answer as T;
}
