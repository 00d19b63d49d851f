// A real OpenID provider for the page's sign-in tests: oidc-provider (OpenID Certified), in-process
// on loopback, its issuer on "localhost" so that the page (on 127.0.0.1) and the provider are two
// sites, as in production. Its sign-in form (the library's development interactions) takes a login
// id; each test person has one, a tidemark name, a display name and groups (the roles claim).
// `signIn` walks the whole authorization-code flow over HTTP, as a browser would, with a cookie jar
// per site.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

export interface TestPerson {
  /** The tidemark name (preferred_username). */
  readonly name: string;
  readonly displayName: string;
  readonly groups: readonly string[];
}

export interface TestIdp {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  stop(): Promise<void>;
}

/**
 * Starts the provider with `people` by login id, one confidential client whose redirect URI is
 * `redirectUri` (PKCE required), and the device flow on.
 */
export async function startIdp(
  people: Readonly<Record<string, TestPerson>>,
  redirectUri: string,
): Promise<TestIdp> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const issuer = `http://localhost:${(server.address() as AddressInfo).port}`;
  const clientId = 'tidemark-page';
  const clientSecret = 'page-client-secret-0123456789abcdef';
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'urn:ietf:params:oauth:grant-type:device_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    async findAccount(_ctx, id) {
      const p = people[id];
      if (!p) return undefined;
      return {
        accountId: id,
        claims: async () => ({
          sub: id,
          preferred_username: p.name,
          name: p.displayName,
          groups: [...p.groups],
        }),
      };
    },
    claims: { openid: ['sub'], profile: ['name', 'preferred_username'], groups: ['groups'] },
    scopes: ['openid', 'profile', 'email', 'groups'],
    features: { devInteractions: { enabled: true }, deviceFlow: { enabled: true } },
    pkce: { required: () => true },
    cookies: { keys: ['idp-cookie-key-for-tests-only'] },
    // The page is a first party: its grant is given without a consent screen.
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({ clientId, accountId: ctx.oidc.session!.accountId! });
      grant.addOIDCScope('openid profile email groups');
      await grant.save();
      return grant;
    },
  });
  // The development interactions warn on the console once; tests know.
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    stop: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** name=value of each cookie a response sets, into `jar`. */
function keep(jar: Map<string, string>, r: Response): void {
  for (const c of r.headers.getSetCookie()) {
    const [pair = ''] = c.split(';');
    const at = pair.indexOf('=');
    const value = pair.slice(at + 1);
    if (/max-age=0/i.test(c) || value === '') jar.delete(pair.slice(0, at));
    else jar.set(pair.slice(0, at), value);
  }
}
const cookieHeader = (jar: Map<string, string>) => [...jar].map(([k, v]) => `${k}=${v}`).join('; ');

/**
 * Signs `login` in to the page at `pageUrl` through the provider, as a browser would; returns the
 * page's session cookie (name=value) and what the flow showed on the way.
 */
export async function signIn(
  pageUrl: string,
  login: string,
): Promise<{ cookie: string; authorizeUrl: URL; answer: Response }> {
  const page = new Map<string, string>();
  const idp = new Map<string, string>();
  const start = await fetch(`${pageUrl}/auth/login`, { redirect: 'manual' });
  assert.equal(start.status, 302, await start.text());
  keep(page, start);
  const authorizeUrl = new URL(start.headers.get('location')!);
  // At the provider: its authorization endpoint, its sign-in form, back to the page.
  let next: string = authorizeUrl.href;
  for (let hop = 0; hop < 10; hop++) {
    if (next.startsWith(pageUrl)) break;
    const r = await fetch(next, { redirect: 'manual', headers: { cookie: cookieHeader(idp) } });
    keep(idp, r);
    if (r.status === 200 && /name="login"/.test(await r.clone().text())) {
      const submit = await fetch(next, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie: cookieHeader(idp), 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ prompt: 'login', login, password: 'any' }).toString(),
      });
      keep(idp, submit);
      next = new URL(submit.headers.get('location')!, next).href;
      continue;
    }
    assert.ok(r.status >= 300 && r.status < 400, `the provider answered ${r.status}: ${await r.text()}`);
    next = new URL(r.headers.get('location')!, next).href;
  }
  assert.ok(next.startsWith(`${pageUrl}/auth/callback`), `the provider sent the browser to ${next}`);
  const answer = await fetch(next, { redirect: 'manual', headers: { cookie: cookieHeader(page) } });
  keep(page, answer);
  const session = page.get('tidemark_session');
  return { cookie: session ? `tidemark_session=${session}` : '', authorizeUrl, answer };
}

/**
 * Completes a device sign-in at the provider as `login` would in a browser, from the address
 * `tidemark login` printed: the code's confirmation, the sign-in form; returns the last page shown.
 */
export async function approveDevice(start: string, login: string): Promise<string> {
  const jar = new Map<string, string>();
  let url = start;
  let form: URLSearchParams | undefined;
  for (let hop = 0; hop < 20; hop++) {
    const r = await fetch(url, {
      method: form ? 'POST' : 'GET',
      redirect: 'manual',
      headers: {
        cookie: cookieHeader(jar),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      ...(form ? { body: form.toString() } : {}),
    });
    keep(jar, r);
    form = undefined;
    if (r.status >= 300 && r.status < 400) {
      url = new URL(r.headers.get('location')!, url).href;
      continue;
    }
    const html = await r.text();
    assert.equal(r.status, 200, `the provider answered ${r.status}: ${html.slice(0, 500)}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (!action) return html;
    form = new URLSearchParams();
    for (const [, attrs = ''] of html.matchAll(/<input([^>]*)>/g)) {
      const name = /name="([^"]+)"/.exec(attrs)?.[1];
      if (name) form.set(name, /value="([^"]*)"/.exec(attrs)?.[1] ?? '');
    }
    if (form.has('login')) form.set('login', login);
    if (form.has('password')) form.set('password', 'any');
    url = new URL(action.replace(/&amp;/g, '&'), url).href;
  }
  throw new Error(`the device sign-in did not finish: last at ${url}`);
}
