// The CLI's sign-in, kept between commands: `tidemark login` stores the page's address and a token
// of the person's own (made by the page through the identity provider's device flow) in a file only
// its owner may read (mode 0600; a file others can read is refused, not used). Signed in, the CLI's
// decisions go through the page, which knows who is deciding and signs it for the workers.
import { chmod, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
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

/** The kept sign-in; null when there is none or it has expired. Refuses a file others may read. */
export async function readLogin(file = loginFile(), now = new Date()): Promise<Login | null> {
  const info = await stat(file).catch(() => null);
  if (!info) return null;
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

/** Keeps `login`: written whole (a crash leaves the old file or the new), mode 0600, in a 0700 directory. */
export async function writeLogin(login: Login, file = loginFile()): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const part = `${file}.${process.pid}.part`;
  await writeFile(part, `${JSON.stringify(login, null, 2)}\n`, { mode: 0o600 });
  await chmod(part, 0o600);
  await rename(part, file);
}

export const forgetLogin = (file = loginFile()) => rm(file, { force: true });

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
