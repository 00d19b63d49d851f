// Who acts on the page: people sign in through a real OpenID provider (oidc-provider, in-process,
// on another site than the page) with the authorization code flow and PKCE; their session is kept
// in PostgreSQL, expires and logs out; their roles come from the provider's groups, and a missing
// role is a 403 naming it, on the page hidden. Decisions carry the signed-in person, signed for the
// workers: asking and approving as one person is self-approval, whatever the request's body says.
import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { RerunResult } from '../../../contract/workflows.js';
import { sha256Hex } from '../../../web/sessions.js';
import { approveDevice, startIdp, signIn, type TestIdp } from '../../helpers/idp.js';
import { run as runCli } from '../../../cli/main.js';
import { freePort } from '../../helpers/net.js';
import { rerunTools } from '../../helpers/reruns.js';
import { eventually, realStack, withWorker } from '../../helpers/temporal.js';
import { startWeb } from '../../helpers/web.js';
import { checkAccessibility, jobCard, launchBrowser } from '../../helpers/browser.js';

const stack = realStack();
const { rerunJob, processWindow, waitForRequest } = rerunTools(stack);

const PEOPLE = {
  u1001: { name: 'alice', displayName: 'Alice Operator', groups: ['staff', 'tm-ops'] },
  u1002: { name: 'bob', displayName: 'Bob Approver', groups: ['tm-leads'] },
  u1003: { name: 'vera', displayName: 'Vera Viewer', groups: ['tm-readers'] },
  u1004: { name: 'olga', displayName: 'Olga Both', groups: ['tm-ops', 'tm-leads'] },
  u1005: { name: 'nick', displayName: 'Nick Nobody', groups: ['staff'] },
  // A name that would read as bob's; a display name with a terminal escape and a line break.
  u1006: { name: 'bob\u200b', displayName: 'Not Bob', groups: ['tm-leads'] },
  u1007: { name: 'eve', displayName: 'Eve\u001b[31m\u202e\nRoot', groups: ['tm-readers'] },
};
const ROLE_MAP = 'tm-readers=viewer,tm-ops=operator,tm-leads=approver,tm-platform=admin';
const DECISION_KEY = 'decision-key-of-the-page-and-workers-0123456789';

let idp: TestIdp;
let port: number;
let webUrl: string;
before(async () => {
  port = await freePort();
  webUrl = `http://127.0.0.1:${port}`;
  idp = await startIdp(PEOPLE, `${webUrl}/auth/callback`);
});
after(() => idp?.stop());

/** The page signing people in through the test provider, on its redirect URI's port. */
function oidcWeb(
  catalog: Parameters<typeof startWeb>[1]['catalog'],
  env: Record<string, string> = {},
  now?: () => Date,
  /** Another port than the redirect URI's (a second instance, reached directly). */
  on = port,
) {
  return startWeb(stack, {
    port: on,
    catalog,
    ...(now ? { now } : {}),
    env: {
      TIDEMARK_OIDC_ISSUER: idp.issuer,
      TIDEMARK_OIDC_CLIENT_ID: idp.clientId,
      TIDEMARK_OIDC_CLIENT_SECRET: idp.clientSecret,
      TIDEMARK_WEB_URL: webUrl,
      TIDEMARK_OIDC_ROLES: ROLE_MAP,
      TIDEMARK_DECISION_KEY: DECISION_KEY,
      TIDEMARK_WEB_TOKEN: 'a-shared-token-that-opens-nothing-here',
      ...env,
    },
  });
}

const me = async (cookie: string, at = webUrl) => {
  const r = await fetch(`${at}/api/me`, { headers: { cookie } });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
};

const post = async (cookie: string, path: string, body: unknown) => {
  const page = await fetch(`${webUrl}/`, { headers: { cookie } }).then((r) => r.text());
  const csrf = /name="csrf" content="([0-9a-f]*)"/.exec(page)?.[1] ?? '';
  const r = await fetch(`${webUrl}${path}`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/json', 'x-csrf-token': csrf },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json().catch(() => ({}))) as Record<string, unknown> };
};

describe('signing in through the identity provider', () => {
  test('authorization code with PKCE, a session in the database, roles from groups, and logout', async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-login', { start: '2026-05-01T10:00:00Z', end: '2026-05-01T11:00:00Z' }, 1);
    const web = await oidcWeb(catalog);
    try {
      // The page says how people sign in.
      assert.match(await (await fetch(`${webUrl}/`)).text(), /data-mode="oidc"/);
      const { cookie, authorizeUrl, answer } = await signIn(webUrl, 'u1001');
      assert.equal(authorizeUrl.origin, idp.issuer);
      assert.equal(authorizeUrl.searchParams.get('code_challenge_method'), 'S256');
      assert.match(authorizeUrl.searchParams.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
      assert.ok(authorizeUrl.searchParams.get('nonce') && authorizeUrl.searchParams.get('state'));
      assert.equal(answer.status, 200);
      assert.ok(cookie, 'signed in');
      const who = await me(cookie);
      assert.equal(who.status, 200);
      assert.deepEqual(
        { ...who.body },
        {
          mode: 'oidc',
          name: 'alice',
          displayName: 'Alice Operator',
          subject: 'u1001',
          roles: ['viewer', 'operator'],
          verified: true,
        },
      );
      // Kept in PostgreSQL under the cookie's hash, never the cookie itself.
      const rows = await stack.t.db
        .selectFrom('web_sessions')
        .selectAll()
        .where('subject', '=', 'u1001')
        .execute();
      assert.equal(rows.length, 1);
      const value = cookie.split('=')[1]!;
      assert.equal(rows[0]!.id, sha256Hex(value));
      assert.notEqual(rows[0]!.id, value);
      // The shared token opens nothing when people sign in through the provider.
      const shared = await fetch(`${webUrl}/api/me`, {
        headers: { authorization: 'Bearer a-shared-token-that-opens-nothing-here' },
      });
      assert.equal(shared.status, 401);
      const login = await fetch(`${webUrl}/login`, {
        method: 'POST',
        body: 'token=a-shared-token-that-opens-nothing-here',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        redirect: 'manual',
      });
      assert.equal(login.status, 404);
      // Logout ends the session in the database: the cookie opens nothing after.
      const page = await fetch(`${webUrl}/`, { headers: { cookie } }).then((r) => r.text());
      const csrf = /name="csrf" content="([0-9a-f]+)"/.exec(page)![1]!;
      const out = await fetch(`${webUrl}/logout`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: `csrf=${csrf}`,
        redirect: 'manual',
      });
      assert.equal(out.status, 303);
      assert.equal((await me(cookie)).status, 401);
      const loggedOut = await stack.t.db
        .selectFrom('web_actions')
        .select('credential')
        .where('action', '=', 'POST /logout')
        .where('subject', '=', 'u1001')
        .execute();
      assert.deepEqual(loggedOut, [{ credential: `session:${rows[0]!.id.slice(0, 16)}` }]);
      assert.equal(
        (await stack.t.db.selectFrom('web_sessions').selectAll().where('subject', '=', 'u1001').execute())
          .length,
        0,
      );
    } finally {
      await web.stop();
    }
  });

  test('a session survives the page restarting and ends when it expires', async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-expiry', { start: '2026-05-01T10:00:00Z', end: '2026-05-01T11:00:00Z' }, 1);
    let clock = new Date();
    const now = () => clock;
    const first = await oidcWeb(catalog, { TIDEMARK_WEB_SESSION_TTL: '1h' }, now);
    const { cookie } = await signIn(webUrl, 'u1003');
    assert.equal((await me(cookie)).status, 200);
    await first.stop();
    // Another instance (the page restarted, or a replica): the session is in the database. It
    // listens on a port of its own, so no connection to the stopped one is reused.
    const web = await oidcWeb(catalog, { TIDEMARK_WEB_SESSION_TTL: '1h' }, now, 0);
    try {
      assert.equal((await me(cookie, web.url)).body.name, 'vera', 'a restart logs nobody out');
      clock = new Date(clock.getTime() + 59 * 60_000);
      assert.equal((await me(cookie, web.url)).status, 200);
      clock = new Date(clock.getTime() + 60_000);
      assert.equal((await me(cookie, web.url)).status, 401, 'expired after an hour');
    } finally {
      await web.stop();
    }
  });

  test("a sign-in is refused when it is not this browser's, is used twice, or gives no role", async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-refused', { start: '2026-05-01T10:00:00Z', end: '2026-05-01T11:00:00Z' }, 1);
    const web = await oidcWeb(catalog);
    try {
      // Nick's groups map to no role: no session, and the page says why and what to do.
      const nobody = await signIn(webUrl, 'u1005');
      assert.equal(nobody.cookie, '');
      assert.equal(nobody.answer.status, 403);
      assert.match(
        await nobody.answer.text(),
        /nick is signed in but has no role in tidemark.*TIDEMARK_OIDC_ROLES/,
      );
      // A callback without the browser's login cookie (a link someone was sent): refused.
      const foreign = await fetch(`${webUrl}/auth/callback?code=abc&state=${'s'.repeat(43)}`, {
        redirect: 'manual',
      });
      assert.equal(foreign.status, 403);
      assert.match(await foreign.text(), /not begun in this browser/);
      // The provider's error comes back named.
      const denied = await fetch(`${webUrl}/auth/callback?error=access_denied&error_description=no`, {
        redirect: 'manual',
      });
      assert.equal(denied.status, 403);
      assert.match(await denied.text(), /access_denied/);
      assert.equal(
        (await stack.t.db.selectFrom('web_sessions').selectAll().where('subject', '=', 'u1005').execute())
          .length,
        0,
      );
    } finally {
      await web.stop();
    }
  });

  test("each action needs its role: 403 naming the role, the codec's encode an admin's", async () => {
    const W = { start: '2026-05-02T10:00:00Z', end: '2026-05-02T11:00:00Z' };
    const {
      deps: { catalog },
    } = await rerunJob('id-roles', W, 1);
    const web = await oidcWeb(catalog);
    try {
      const viewer = (await signIn(webUrl, 'u1003')).cookie;
      const operator = (await signIn(webUrl, 'u1001')).cookie;
      // The viewer reads everything, and does nothing.
      assert.equal((await fetch(`${webUrl}/api/jobs`, { headers: { cookie: viewer } })).status, 200);
      for (const [path, role] of [
        ['/api/jobs/id-roles/trigger', 'operator'],
        ['/api/jobs/id-roles/pause', 'operator'],
        ['/api/jobs/id-roles/rerun', 'operator'],
        ['/api/approvals/approve', 'approver'],
        ['/api/effects/x/skip', 'approver'],
      ] as const) {
        const r = await post(viewer, path, { reason: 'x' });
        assert.equal(r.status, 403, `${path}: ${JSON.stringify(r.body)}`);
        assert.match(String(r.body.error), new RegExp(`^this needs the ${role} role .*vera has viewer`));
      }
      // The operator may act, but not decide.
      assert.equal((await post(operator, '/api/approvals/approve', { request: 'x' })).status, 403);
      const encode = await fetch(`${webUrl}/codec/encode`, {
        method: 'POST',
        headers: { cookie: operator, 'content-type': 'application/json' },
        body: '{"payloads":[]}',
      });
      assert.equal(encode.status, 403);
      assert.match(((await encode.json()) as { error: string }).error, /encode needs the admin role/);
      // A large backfill is an admin's: the operator is told so.
      const large = await post(operator, '/api/jobs/id-roles/backfill', {
        from: '2020-01-01T00:00:00Z',
        to: '2026-01-01T00:00:00Z',
        allowLarge: true,
      });
      assert.equal(large.status, 403, JSON.stringify(large.body));
      assert.match(String(large.body.error), /needs the admin role/);
    } finally {
      await web.stop();
    }
  });
});

describe('personal API tokens', () => {
  test("made for one of one's roles, shown once, kept hashed, listed, and revoked at once", async () => {
    let clock = new Date();
    const {
      deps: { catalog },
    } = await rerunJob('id-tokens', { start: '2026-05-05T10:00:00Z', end: '2026-05-05T11:00:00Z' }, 1);
    const web = await oidcWeb(catalog, {}, () => clock);
    try {
      const alice = (await signIn(webUrl, 'u1001')).cookie;
      // Each field named when wrong; a role one does not have is not one's to give.
      for (const [body, status, error] of [
        [{ role: 'operator' }, 400, /^label: say what the token is for/],
        [{ label: 'x', role: 'boss' }, 400, /^role: one of viewer, operator, approver, admin/],
        [
          { label: 'x', role: 'approver' },
          403,
          /^role: you have viewer, operator; a token cannot have approver/,
        ],
        [{ label: 'x', role: 'operator', expiresIn: '400d' }, 400, /^expiresIn: a duration up to 366d/],
        [{ label: 'evil\u202e\nlabel', role: 'operator' }, 400, /^label: control or invisible characters/],
      ] as const) {
        const r = await post(alice, '/api/tokens', body);
        assert.equal(r.status, status, JSON.stringify(r.body));
        assert.match(String(r.body.error), error);
      }
      const made = await post(alice, '/api/tokens', {
        label: 'nightly export',
        role: 'operator',
        expiresIn: '2d',
      });
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const token = String(made.body.token);
      // Its making is in the audit, naming the token.
      assert.deepEqual(
        await stack.t.db
          .selectFrom('web_actions')
          .select(['action', 'subject'])
          .where('target', '=', String(made.body.id))
          .execute(),
        [{ action: 'POST /api/tokens', subject: 'u1001' }],
      );
      assert.match(token, /^tmk_[a-z0-9]{12}_[A-Za-z0-9_-]{43}$/);
      const bearer = { authorization: `Bearer ${token}` };
      const meByToken = await fetch(`${webUrl}/api/me`, { headers: bearer }).then((r) => r.json());
      assert.deepEqual(
        { ...(meByToken as object) },
        {
          mode: 'oidc',
          name: 'alice',
          displayName: 'Alice Operator',
          subject: 'u1001',
          roles: ['viewer', 'operator'],
          verified: true,
        },
      );
      // Scoped to its role: an operator's token decides nothing.
      const decide = await fetch(`${webUrl}/api/approvals/approve`, {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json' },
        body: '{"request":"x"}',
      });
      assert.equal(decide.status, 403);
      // Listed without its secret; the table holds only the secret's hash.
      const listed = (await fetch(`${webUrl}/api/tokens`, { headers: { cookie: alice } }).then((r) =>
        r.json(),
      )) as {
        tokens: Record<string, unknown>[];
      };
      assert.deepEqual(
        listed.tokens.map((t) => [t.label, t.roles, t.revokedAt, typeof t.lastUsedAt]),
        [['nightly export', ['viewer', 'operator'], null, 'string']],
      );
      assert.doesNotMatch(JSON.stringify(listed), new RegExp(token.slice(17)));
      const rows = await stack.t.db.selectFrom('api_tokens').selectAll().execute();
      assert.doesNotMatch(JSON.stringify(rows), new RegExp(token.slice(17)));
      // Another person cannot see or revoke it.
      const bob = (await signIn(webUrl, 'u1002')).cookie;
      const bobs = (await fetch(`${webUrl}/api/tokens`, { headers: { cookie: bob } }).then((r) =>
        r.json(),
      )) as {
        tokens: unknown[];
      };
      assert.deepEqual(bobs.tokens, []);
      assert.equal((await post(bob, `/api/tokens/${String(made.body.id)}/revoke`, {})).status, 404);
      // Revoked in the middle of a client's work: its next request is refused.
      assert.equal((await fetch(`${webUrl}/api/jobs`, { headers: bearer })).status, 200);
      assert.equal((await post(alice, `/api/tokens/${String(made.body.id)}/revoke`, {})).status, 200);
      assert.equal((await fetch(`${webUrl}/api/jobs`, { headers: bearer })).status, 401);
      // And one that expires is refused once its time is up.
      const short = String(
        (await post(alice, '/api/tokens', { label: 'short', role: 'viewer', expiresIn: '1h' })).body.token,
      );
      assert.equal(
        (await fetch(`${webUrl}/api/jobs`, { headers: { authorization: `Bearer ${short}` } })).status,
        200,
      );
      clock = new Date(clock.getTime() + 61 * 60_000);
      assert.equal(
        (await fetch(`${webUrl}/api/jobs`, { headers: { authorization: `Bearer ${short}` } })).status,
        401,
      );
    } finally {
      await web.stop();
    }
  });
});

describe('sign-in and tokens at their edges', () => {
  test('roles by the route matched, whatever the encoding; a token makes no token; a stream ends with its token', async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-edges', { start: '2026-05-07T10:00:00Z', end: '2026-05-07T11:00:00Z' }, 1);
    const web = await oidcWeb(catalog);
    try {
      const vera = (await signIn(webUrl, 'u1003')).cookie;
      for (const path of ['/codec/encode', '/codec/%65ncode', '/codec/encod%65']) {
        const r = await fetch(`${webUrl}${path}`, {
          method: 'POST',
          headers: { cookie: vera, 'content-type': 'application/json' },
          body: '{"payloads":[]}',
        });
        assert.equal(r.status, 403, `${path}: ${await r.text()}`);
      }
      const alice = (await signIn(webUrl, 'u1001')).cookie;
      const made = await post(alice, '/api/tokens', { label: 'short', role: 'viewer', expiresIn: '1h' });
      const bearer = { authorization: `Bearer ${String(made.body.token)}` };
      const child = await fetch(`${webUrl}/api/tokens`, {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json' },
        body: JSON.stringify({ label: 'forever', role: 'viewer', expiresIn: '366d' }),
      });
      assert.equal(child.status, 403);
      assert.match(((await child.json()) as { error: string }).error, /^tokens are made on the page/);
      // The update stream of a token ends once the token is revoked.
      const stream = await fetch(`${webUrl}/api/events`, { headers: bearer });
      const reader = stream.body!.getReader();
      assert.ok(
        Buffer.from((await reader.read()).value!)
          .toString()
          .startsWith('data: '),
      );
      assert.equal((await post(alice, `/api/tokens/${String(made.body.id)}/revoke`, {})).status, 200);
      const ended = await eventually(
        async () => {
          const r = await reader.read();
          return r.done ? true : undefined;
        },
        20_000,
        'the stream to end',
      );
      assert.equal(ended, true);
    } finally {
      await web.stop();
    }
  });

  test('a session opened with the shared token opens nothing once the page signs people in', async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-switch', { start: '2026-05-08T10:00:00Z', end: '2026-05-08T11:00:00Z' }, 1);
    const single = await startWeb(stack, { token: 'single-user-token-0123', catalog, env: {} });
    const login = await fetch(`${single.url}/login`, {
      method: 'POST',
      body: 'token=single-user-token-0123',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      redirect: 'manual',
    });
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
    assert.equal((await fetch(`${single.url}/api/me`, { headers: { cookie } })).status, 200);
    await single.stop();
    const web = await oidcWeb(catalog);
    try {
      assert.equal((await me(cookie)).status, 401);
    } finally {
      await web.stop();
    }
  });

  test("names that would read as another's are refused; a display name is shown without control characters", async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-names', { start: '2026-05-09T10:00:00Z', end: '2026-05-09T11:00:00Z' }, 1);
    const web = await oidcWeb(catalog);
    try {
      const lookalike = await signIn(webUrl, 'u1006');
      assert.equal(lookalike.cookie, '');
      assert.match(await lookalike.answer.text(), /is not a name tidemark can use/);
      const eve = await signIn(webUrl, 'u1007');
      assert.equal((await me(eve.cookie)).body.displayName, 'Eve[31m Root');
    } finally {
      await web.stop();
    }
  });
});

describe('decisions by verified people', () => {
  test("asking and approving as one person is self-approval; another approver's approval applies, audited with both subjects", async () => {
    const job = 'id-four-eyes';
    const W = { start: '2026-05-03T10:00:00Z', end: '2026-05-03T11:00:00Z' };
    const { taskQueue, deps } = await rerunJob(job, W, 3, { temporal: true });
    const workers = {
      ...deps,
      approvals: {
        policy: { approvers: [], allowSelfApproval: false, requireProof: true },
        decisionKey: DECISION_KEY,
      },
    };
    const web = await oidcWeb(deps.catalog, { TIDEMARK_TASK_QUEUE: taskQueue });
    try {
      await withWorker(stack.env, taskQueue, workers, async () => {
        await processWindow(taskQueue, job, W);
        const olga = (await signIn(webUrl, 'u1004')).cookie; // operator and approver
        const bob = (await signIn(webUrl, 'u1002')).cookie;
        // A name in the body is not believed: Olga cannot ask as someone else.
        const asOther = await post(olga, `/api/jobs/${job}/rerun`, {
          window: W.start,
          reason: 'x',
          by: 'alice',
        });
        assert.equal(asOther.status, 400);
        assert.match(String(asOther.body.error), /^by: you are signed in as olga/);
        const asked = await post(olga, `/api/jobs/${job}/rerun`, { window: W.start, reason: 'late orders' });
        assert.equal(asked.status, 200, JSON.stringify(asked.body));
        const request = String(asked.body.request);
        assert.equal((await waitForRequest(request)).request?.window.generation, 1);
        const row = await stack.t.db
          .selectFrom('rerun_requests')
          .select('requested_by')
          .where('workflow_id', '=', request)
          .executeTakeFirstOrThrow();
        assert.equal(row.requested_by, 'olga');
        // Olga has the approver role, and still may not approve her own request.
        const own = await post(olga, '/api/approvals/approve', { request });
        assert.equal(own.status, 409, JSON.stringify(own.body));
        assert.match(String(own.body.error), /olga asked for this rerun and may not approve it/);
        // Bob approves: no name in TIDEMARK_APPROVERS, the approver role signed by the page.
        const approved = await post(bob, '/api/approvals/approve', { request });
        assert.equal(approved.status, 200, JSON.stringify(approved.body));
        const result = (await stack.env.client.workflow.getHandle(request).result()) as RerunResult;
        assert.equal(result.outcome, 'done');
        const audit = await stack.t.db
          .selectFrom('approval_audit')
          .select(['actor', 'accepted', 'source', 'subject', 'display_name', 'credential'])
          .where('request', '=', request)
          .orderBy('id')
          .execute();
        assert.deepEqual(
          audit.map((a) => [a.actor, a.accepted, a.source, a.subject, a.display_name]),
          [
            ['olga', false, 'web', 'u1004', 'Olga Both'],
            ['bob', true, 'web', 'u1002', 'Bob Approver'],
          ],
        );
        // The window's detail shows both people as verified, and through what.
        const detail = (await fetch(
          `${webUrl}/api/jobs/${job}/windows/${encodeURIComponent(`${job}/${W.start}`)}`,
          {
            headers: { cookie: bob },
          },
        ).then((r) => r.json())) as {
          reruns: {
            askedThrough: { subject: string; displayName: string; credential: string } | null;
            decisions: {
              actor: string;
              accepted: boolean;
              subject: string | null;
              displayName: string | null;
            }[];
          }[];
        };
        const shown = detail.reruns.find((r) => r.askedThrough)!;
        assert.equal(shown.askedThrough?.subject, 'u1004');
        assert.equal(shown.askedThrough?.displayName, 'Olga Both');
        assert.match(shown.askedThrough?.credential ?? '', /^session:[0-9a-f]{16}$/);
        assert.deepEqual(
          shown.decisions.map((x) => [x.actor, x.accepted, x.subject, x.displayName]),
          [
            ['olga', false, 'u1004', 'Olga Both'],
            ['bob', true, 'u1002', 'Bob Approver'],
          ],
        );
        assert.ok(
          audit.every((a) => /^session:[0-9a-f]{16}$/.test(a.credential ?? '')),
          JSON.stringify(audit),
        );
      });
    } finally {
      await web.stop();
    }
  });
});

describe('the CLI signed in', () => {
  test("tidemark login signs the CLI in through the device flow; its decisions are that person's, verified", async () => {
    const job = 'id-cli';
    const W = { start: '2026-05-06T10:00:00Z', end: '2026-05-06T11:00:00Z' };
    const { taskQueue, deps } = await rerunJob(job, W, 2, { temporal: true });
    const workers = {
      ...deps,
      approvals: {
        policy: { approvers: ['bob'], allowSelfApproval: false, requireProof: true },
        decisionKey: DECISION_KEY,
      },
    };
    // A session lifetime past a year: the CLI's token still lasts at most 366 days.
    const pageEnv = { TIDEMARK_TASK_QUEUE: taskQueue, TIDEMARK_WEB_SESSION_TTL: '400d' };
    const web = await oidcWeb(deps.catalog, pageEnv);
    const dir = await mkdtemp(join(tmpdir(), 'tidemark-login-'));
    const file = join(dir, 'tidemark', 'login.json');
    const saved = { ...process.env };
    Object.assign(process.env, {
      TIDEMARK_LOGIN_FILE: file,
      DATABASE_URL: stack.t.url,
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: taskQueue,
    });
    const cli = async (args: string[], then?: (err: string[]) => Promise<void>) => {
      const out: string[] = [];
      const err: string[] = [];
      const running = runCli(args, {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
        json: false,
        tty: false,
      });
      if (then) await then(err);
      return { code: await running, out: out.join('\n'), err: err.join('\n') };
    };
    /** `tidemark login` with the person's browser finishing the device sign-in at the provider. */
    const login = (who: string) =>
      cli(['login', '--web', webUrl], async (err) => {
        const url = await eventually(
          async () => /open (\S+)/.exec(err.join('\n'))?.[1],
          20_000,
          'the address to sign in at',
        );
        assert.match(await approveDevice(url, who), /success|signed in|complete/i);
      });
    try {
      await withWorker(stack.env, taskQueue, workers, async () => {
        await processWindow(taskQueue, job, W);
        const olgaPage = (await signIn(webUrl, 'u1004')).cookie;
        const asked = await post(olgaPage, `/api/jobs/${job}/rerun`, { window: W.start, reason: 'late' });
        assert.equal(asked.status, 200, JSON.stringify(asked.body));
        const request = String(asked.body.request);
        await waitForRequest(request);

        // Olga signs the CLI in: the token is kept in a file only she may read.
        const olga = await login('u1004');
        assert.equal(olga.code, 0, olga.err);
        assert.match(olga.out, /signed in as Olga Both \(olga\), roles viewer, operator, approver/);
        assert.equal((await stat(file)).mode & 0o777, 0o600);
        assert.equal((await stat(join(dir, 'tidemark'))).mode & 0o777, 0o700);
        // The same person on the page and in the CLI: her approval is self-approval.
        const own = await cli(['approve', request]);
        assert.equal(own.code, 1);
        assert.match(own.err, /olga asked for this rerun and may not approve it/);
        // A name on the command line is not believed while signed in.
        const asBob = await cli(['approve', request, '--by', 'bob']);
        assert.equal(asBob.code, 2);
        assert.match(asBob.err, /--by: you are signed in as olga/);

        // Her sign-in is in the audit, with the token it made.
        const kept = JSON.parse(await readFile(file, 'utf8')) as { id: string; expiresAt: string };
        assert.ok(Date.parse(kept.expiresAt) <= Date.now() + 366 * 86_400_000, kept.expiresAt);
        const signedIn = await stack.t.db
          .selectFrom('web_actions')
          .select(['subject', 'credential'])
          .where('action', '=', 'POST /auth/device/token')
          .where('target', '=', kept.id)
          .execute();
        assert.deepEqual(signedIn, [{ subject: 'u1004', credential: `token:${kept.id}` }]);
        // Logging out while the page cannot be reached (the kept address, a port nobody listens on)
        // revokes nothing: said so, and the file kept for a retry.
        const original = await readFile(file, 'utf8');
        await writeFile(file, original.replace(webUrl, `http://127.0.0.1:${await freePort()}`));
        const down = await cli(['logout']);
        assert.equal(down.code, 1);
        assert.match(down.err, new RegExp(`token ${kept.id} was not revoked .*could not be reached`));
        await writeFile(file, original);
        // Not signed in, a decision by name reaches the workers unsigned: refused.
        const out = await cli(['logout']);
        assert.equal(out.code, 0, out.err);
        assert.match(out.out, new RegExp(`token ${kept.id} revoked`));
        await assert.rejects(stat(file));
        const unsigned = await cli(['approve', request, '--by', 'bob']);
        assert.equal(unsigned.code, 1);
        assert.match(unsigned.err, /carries no valid signature of the page or the Slack app/);

        // Bob signs in and approves: applied, audited with his subject and the CLI's token.
        assert.equal((await login('u1002')).code, 0);
        const me = await cli(['whoami']);
        assert.match(me.out, /Bob Approver \(bob\) at http:\/\/127\.0\.0\.1:\d+, roles viewer, approver/);
        const approved = await cli(['approve', request]);
        assert.equal(approved.code, 0, approved.err);
        assert.equal(
          ((await stack.env.client.workflow.getHandle(request).result()) as RerunResult).outcome,
          'done',
        );
        const audit = await stack.t.db
          .selectFrom('approval_audit')
          .select(['actor', 'accepted', 'subject', 'credential'])
          .where('request', '=', request)
          .where('accepted', '=', true)
          .execute();
        assert.equal(audit.length, 1);
        assert.equal(audit[0]!.actor, 'bob');
        assert.equal(audit[0]!.subject, 'u1002');
        assert.match(audit[0]!.credential ?? '', /^token:[a-z0-9]{12}$/);
        // A kept sign-in that others may read is refused, not used.
        await chmod(file, 0o644);
        const loose = await cli(['whoami']);
        assert.equal(loose.code, 1);
        assert.match(loose.err, /may be read by others \(mode 644\).*chmod 600/);
      });
    } finally {
      process.env = saved;
      await rm(dir, { recursive: true, force: true });
      await web.stop();
    }
  });
});

describe('the page signed in, in Chromium', () => {
  test("sign in at the provider, see one's name and only what one may do, log out", async () => {
    const {
      deps: { catalog },
    } = await rerunJob('id-browser', { start: '2026-05-04T10:00:00Z', end: '2026-05-04T11:00:00Z' }, 1);
    let clock = new Date();
    const web = await oidcWeb(catalog, { TIDEMARK_WEB_SESSION_TTL: '2h' }, () => clock);
    const browser = await launchBrowser();
    try {
      const pageAs = async (login: string) => {
        const page = await (await browser.newContext()).newPage();
        await page.goto(webUrl);
        await page.click('text=Sign in with your organisation');
        await page.fill('input[name=login]', login);
        await page.fill('input[name=password]', 'any');
        await page.click('button[type=submit]');
        await page.locator('#nav').waitFor();
        return page;
      };
      const vera = await pageAs('u1003');
      await vera.locator('#who').filter({ hasText: 'Vera Viewer (viewer)' }).waitFor();
      await jobCard(vera, 'id-browser');
      assert.equal(
        await vera.locator('[data-action=trigger]').isVisible(),
        false,
        'a viewer sees no Trigger',
      );
      const alice = await pageAs('u1001');
      await alice.locator('#who').filter({ hasText: 'Alice Operator (viewer, operator)' }).waitFor();
      await (
        await jobCard(alice, 'id-browser')
      )
        .locator('[data-action=trigger]')
        .waitFor({ state: 'visible' });
      // Her tokens, on the page: made for one of her roles, shown once, revoked.
      await alice.click('#nav a[data-view="tokens"]');
      await alice.fill('#tk-label', 'deploy script');
      await alice.selectOption('#tk-role', 'operator');
      await alice.click('button:has-text("Make a token")');
      const secret = await alice.locator('#tk-secret').inputValue();
      assert.match(secret, /^tmk_[a-z0-9]{12}_/);
      assert.equal(
        (await fetch(`${webUrl}/api/me`, { headers: { authorization: `Bearer ${secret}` } })).status,
        200,
      );
      await checkAccessibility(alice, 'the API tokens view');
      await alice.click('button[aria-label="Revoke deploy script"]');
      await alice
        .locator('tr', { hasText: 'deploy script' })
        .locator('td', { hasText: /^revoked / })
        .waitFor();
      assert.equal(
        (await fetch(`${webUrl}/api/me`, { headers: { authorization: `Bearer ${secret}` } })).status,
        401,
      );
      await alice.click('#logout button');
      await alice.locator('#oidc-login').waitFor({ state: 'visible' });
      assert.equal(
        (await alice.context().cookies()).some((c) => c.name === 'tidemark_session'),
        false,
      );
      // Vera's session expires while her page is open: the page goes back to the sign-in.
      clock = new Date(clock.getTime() + 2 * 3_600_000 + 1_000);
      await vera.locator('#oidc-login').waitFor({ state: 'visible', timeout: 30_000 });
      assert.equal(await vera.locator('#nav').isVisible(), false);
    } finally {
      await browser.close();
      await web.stop();
    }
  });
});
