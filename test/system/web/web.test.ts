// The management page in headless Chromium (playwright-core with the system chromium): log in,
// pause (with a reason), resume, trigger and a small backfill (previewed, then started), each
// checked in Temporal and PostgreSQL; its progress shows without a reload; access and CSRF are
// enforced. A screenshot is kept.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Browser } from 'playwright-core';
import { memoryLogger } from '../../../activities/logger.js';
import { defineCatalog } from '../../../schedules/define.js';
import { syncSchedules } from '../../../workers/schedule-sync.js';
import { scheduleIdOf } from '../../../contract/schedule-ids.js';
import { jobCard, launchBrowser, loggedInPage, screenshot } from '../../helpers/browser.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';

const stack = realStack();
const TOKEN = 'web-test-token-7c1e';

test('the management page: pause, resume, trigger and a backfill from the browser', async () => {
  const job = 'web-sales';
  const taskQueue = uniqueQueue('web');
  // The triggered tick catches up two windows; the backfill then has the rest to do.
  const catalog = defineCatalog([
    salesJob(job, { start: '2026-05-20T00:00:00Z', lateness: '0m', maxCatchUp: 2 }),
  ]);
  await syncSchedules(stack.env.client, catalog, { taskQueue, apply: true });
  await insertOrders(stack.t.db, ordersBetween(job, '2026-05-20T00:00:00Z', '2026-05-20T06:00:00Z', 60));
  const web = await startWeb(stack, { token: TOKEN, catalog, env: { TIDEMARK_TASK_QUEUE: taskQueue } });
  let browser: Browser | undefined;
  try {
    browser = await launchBrowser();
    // Access and CSRF.
    assert.equal((await fetch(`${web.url}/api/state`)).status, 401);
    const login = await postLogin(web.url, TOKEN);
    const cookie = sessionCookie(login);
    assert.match(login.headers.get('set-cookie')!, /HttpOnly; SameSite=Strict/);
    assert.doesNotMatch(
      login.headers.get('set-cookie')!,
      /Secure/,
      'plain http: a Secure cookie would be lost',
    );
    // Behind a TLS-terminating proxy (X-Forwarded-Proto: https) the cookie is Secure.
    const behindTls = await fetch(`${web.url}/login`, {
      method: 'POST',
      body: new URLSearchParams({ token: TOKEN }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-proto': 'https' },
      redirect: 'manual',
    });
    assert.match(behindTls.headers.get('set-cookie')!, /HttpOnly; SameSite=Strict; Secure;/);
    assert.equal(
      (await fetch(`${web.url}/api/jobs/${job}/pause`, { method: 'POST', headers: { cookie }, body: '{}' }))
        .status,
      403,
      'no CSRF token',
    );
    assert.equal(
      (
        await fetch(`${web.url}/api/jobs/${job}/pause`, {
          method: 'POST',
          headers: { cookie, origin: 'https://evil.example' },
          body: '{}',
        })
      ).status,
      403,
      'cross-site',
    );
    assert.equal((await postLogin(web.url, 'wrong')).status, 401);

    await withWorker(
      stack.env,
      taskQueue,
      { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
      async () => {
        // Under the CSP the page's own script and style load; anything it refuses shows here.
        const { page, problems } = await loggedInPage(browser!, web.url, TOKEN);
        const card = await jobCard(page, job);
        const schedule = stack.env.client.schedule.getHandle(scheduleIdOf(job));

        await card.locator('button[data-action=pause]').click();
        await card.locator('input[name=reason]').fill('source database upgrade');
        await card.locator('button', { hasText: 'Pause schedule' }).click();
        await card.locator('.state', { hasText: 'paused: source database upgrade' }).waitFor();
        const paused = (await schedule.describe()).state;
        assert.deepEqual([paused.paused, paused.note], [true, 'source database upgrade']);
        await card.locator('button[data-action=resume]').click();
        await card.locator('.state', { hasText: 'active' }).waitFor();
        assert.equal((await schedule.describe()).state.paused, false);

        await card.locator('button[data-action=trigger]').click();
        await eventually(
          async () =>
            (
              await stack.t.db
                .selectFrom('job_runs')
                .select('id')
                .where('job', '=', job)
                .where('kind', '=', 'tick')
                .execute()
            ).length > 0
              ? true
              : undefined,
          20_000,
          'the triggered tick',
        );

        // A backfill: preview first, then start; its progress shows without a reload.
        await page.click('#nav a:has-text("Backfills")');
        await page.check('#bf-zone-utc');
        await page.fill('#bf-from', '2026-05-20T00:00');
        await page.fill('#bf-to', '2026-05-20T06:00');
        await page.click('#bf-preview-button');
        await page.locator('#bf-preview', { hasText: 'to process' }).waitFor();
        await page.click('#bf-start');
        const row = page.locator(
          `li.backfill[data-workflow="${job}/backfill-2026-05-20T00:00:00Z-2026-05-20T06:00:00Z"]`,
        );
        await row.locator('.badge', { hasText: 'Completed' }).waitFor({ timeout: 60_000 });
        assert.match(await row.innerText(), /\b0\s+failed/);
        const done = await stack.t.db
          .selectFrom('job_windows')
          .select('window_start')
          .where('job', '=', job)
          .where('status', '=', 'done')
          .where('window_start', '<', new Date('2026-05-20T06:00:00Z'))
          .execute();
        assert.equal(done.length, 6);
        // A rerun requested through the page's API waits for approval among the pending ones.
        const csrf = await page.locator('meta[name=csrf]').getAttribute('content');
        const asked = await page.evaluate(
          `fetch('/api/jobs/${job}/rerun', { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': ${JSON.stringify(csrf)} }, body: JSON.stringify({ window: '2026-05-20T01:00:00Z', reason: 'late refunds', by: 'alice' }) }).then((r) => r.status)`,
        );
        assert.equal(asked, 200);
        const state = (await (
          await fetch(`${web.url}/api/state`, { headers: { authorization: `Bearer ${TOKEN}` } })
        ).json()) as {
          approvals: { reason: string }[];
        };
        assert.deepEqual(
          state.approvals.map((a) => a.reason),
          ['late refunds'],
        );
        const pending = await stack.t.db
          .selectFrom('rerun_requests')
          .select(['status', 'generation', 'requested_by'])
          .where('job', '=', job)
          .execute();
        assert.deepEqual(pending, [{ status: 'pending', generation: 1, requested_by: 'alice' }]);
        // Issue 8 item 18: a request names its requester; the page never records "web".
        const unnamed = await fetch(`${web.url}/api/jobs/${job}/rerun`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify({ window: '2026-05-20T02:00:00Z', reason: 'x' }),
        });
        assert.equal(unnamed.status, 400);
        assert.match(((await unnamed.json()) as { error: string }).error, /^by: the requester must be named/);
        await screenshot(page, 'management-page');
        assert.deepEqual(problems, { refused: [], errors: [] }, 'nothing refused by the CSP, nothing thrown');

        await page.click('text=Log out');
        await page.locator('input[name=token]').waitFor();
        const afterLogout = await page.evaluate(async () => (await fetch('/api/state')).status);
        assert.equal(afterLogout, 401, 'logged out');
      },
    );
  } finally {
    await browser?.close();
    await web.stop();
  }
});

// Hardening, over real HTTP: each web server gets its own task queue and clock.
async function hardenedServer(env: Record<string, string>, now: () => Date = () => new Date()) {
  const job = 'web-hard';
  const taskQueue = uniqueQueue('web-hard');
  const catalog = defineCatalog([salesJob(job, { start: '2026-05-20T00:00:00Z', lateness: '0m' })]);
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog,
    env: { TIDEMARK_TASK_QUEUE: taskQueue, ...env },
    now,
  });
  const login = async () => {
    const r = await postLogin(web.url, TOKEN);
    assert.equal(r.status, 303, 'logged in');
    const cookie = sessionCookie(r);
    const html = await (await fetch(web.url, { headers: { cookie } })).text();
    const csrf = /<meta name="csrf" content="([a-f0-9]+)"/.exec(html)![1]!;
    return { cookie, csrf, setCookie: r.headers.get('set-cookie')! };
  };
  return { job, web, login };
}

const bearer = { authorization: `Bearer ${TOKEN}` };

test('web: bad input gets 400 naming the field, never 500', async () => {
  const { job, web } = await hardenedServer({});
  try {
    const post = async (path: string, body: string, headers: Record<string, string> = {}) => {
      const r = await fetch(`${web.url}${path}`, {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json', ...headers },
        body,
      });
      return { status: r.status, error: String(((await r.json()) as { error?: string }).error) };
    };
    const cases: [string, string, Record<string, string>, RegExp][] = [
      ['Origin: null', '{}', { origin: 'null' }, /Origin/],
      ['Origin: not a URL', '{}', { origin: 'not a url' }, /Origin/],
      ['a null body', 'null', {}, /body/],
      ['malformed JSON', '{"from": ', {}, /body.*JSON/],
      ['an array body', '[1, 2]', {}, /body/],
      ['a number where a string belongs', '{"from": 5, "to": "2026-05-20T06:00:00Z"}', {}, /from/],
      [
        'a batch of 0',
        '{"from": "2026-05-20T00:00:00Z", "to": "2026-05-20T06:00:00Z", "batch": "0"}',
        {},
        /^batch: /,
      ],
      [
        'a batch of words',
        '{"from": "2026-05-20T00:00:00Z", "to": "2026-05-20T06:00:00Z", "batch": "many"}',
        {},
        /^batch: /,
      ],
    ];
    for (const [what, body, headers, named] of cases) {
      const r = await post(`/api/jobs/${job}/backfill`, body, headers);
      assert.equal(r.status, 400, `${what}: ${r.error}`);
      assert.match(r.error, named, what);
    }
    assert.equal((await post(`/api/jobs/${job}/pause`, 'null')).status, 400, 'null body on pause');
  } finally {
    await web.stop();
  }
});

test('web: a wrong token is refused whatever its length or encoding', async () => {
  const { web } = await hardenedServer({});
  try {
    // Same number of characters as the token but more bytes, shorter, longer, empty.
    for (const wrong of ['é'.repeat(TOKEN.length), 'short', `${TOKEN}-and-more`, '']) {
      const login = await postLogin(web.url, wrong);
      assert.equal(login.status, 401, `login with ${JSON.stringify(wrong)}`);
      const api = await fetch(`${web.url}/api/state`, { headers: { authorization: `Bearer ${wrong}` } });
      assert.equal(api.status, 401, `bearer ${JSON.stringify(wrong)}`);
    }
    assert.equal((await fetch(`${web.url}/api/state`, { headers: bearer })).status, 200);
  } finally {
    await web.stop();
  }
});

test('web: sessions expire after TIDEMARK_WEB_SESSION_TTL and log out', async () => {
  let now = new Date('2026-11-30T12:00:00Z');
  const { web, login } = await hardenedServer({ TIDEMARK_WEB_SESSION_TTL: '1h' }, () => now);
  try {
    const a = await login();
    assert.match(a.setCookie, /Max-Age=3600/);
    const state = async (cookie: string) =>
      (await fetch(`${web.url}/api/state`, { headers: { cookie } })).status;
    assert.equal(await state(a.cookie), 200);
    now = new Date('2026-11-30T12:59:59Z');
    assert.equal(await state(a.cookie), 200, 'still valid just before the TTL');
    now = new Date('2026-11-30T13:00:00Z');
    assert.equal(await state(a.cookie), 401, 'expired at the TTL');

    const b = await login();
    assert.equal(await state(b.cookie), 200);
    const noCsrf = await fetch(`${web.url}/logout`, {
      method: 'POST',
      headers: { cookie: b.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: '',
      redirect: 'manual',
    });
    assert.equal(noCsrf.status, 403, 'logout needs the CSRF token');
    assert.equal(await state(b.cookie), 200);
    const out = await fetch(`${web.url}/logout`, {
      method: 'POST',
      headers: { cookie: b.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: b.csrf }).toString(),
      redirect: 'manual',
    });
    assert.equal(out.status, 303);
    assert.match(out.headers.get('set-cookie') ?? '', /tidemark_session=;.*Max-Age=0/);
    assert.equal(await state(b.cookie), 401, 'logged out');
  } finally {
    await web.stop();
  }
});

test('web: a backfill beyond TIDEMARK_WEB_MAX_BACKFILL_WINDOWS needs an explicit flag', async () => {
  const { job, web } = await hardenedServer({ TIDEMARK_WEB_MAX_BACKFILL_WINDOWS: '24' });
  try {
    const backfill = async (body: Record<string, unknown>) => {
      const r = await fetch(`${web.url}/api/jobs/${job}/backfill`, {
        method: 'POST',
        headers: { ...bearer, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: r.status, body: (await r.json()) as { error?: string; workflowId?: string } };
    };
    const range = { from: '2026-05-20T00:00:00Z', to: '2026-05-22T00:00:00Z' };
    const refused = await backfill(range);
    assert.equal(refused.status, 400);
    assert.match(refused.body.error ?? '', /from, to: .*more than 24 windows of web-hard.*allowLarge/);
    const accepted = await backfill({ ...range, allowLarge: true });
    assert.equal(accepted.status, 200, accepted.body.error);
    const handle = stack.env.client.workflow.getHandle(accepted.body.workflowId!);
    assert.equal((await handle.describe()).type, 'backfill');
    await handle.terminate('test over');
    const small = await backfill({ from: '2026-05-20T00:00:00Z', to: '2026-05-21T00:00:00Z', batch: '10' });
    assert.equal(small.status, 200, 'exactly the limit needs no flag');
    // The page's batch size reaches the workflow.
    const started = (await stack.env.client.workflow.getHandle(small.body.workflowId!).fetchHistory())
      .events![0]!;
    const input = started.workflowExecutionStartedEventAttributes!.input!.payloads![0]!.data!;
    assert.equal((JSON.parse(Buffer.from(input).toString('utf8')) as { batch?: number }).batch, 10);
    await stack.env.client.workflow.getHandle(small.body.workflowId!).terminate('test over');
  } finally {
    await web.stop();
  }
});

test('web: the CSP allows no inline script; the script and style are served as files', async () => {
  const { web } = await hardenedServer({});
  try {
    const page = await fetch(web.url);
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.doesNotMatch(csp, /unsafe-inline/, csp);
    assert.match(csp, /script-src 'self'/);
    const html = await page.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline <script>');
    assert.doesNotMatch(html, /<style|\sstyle=/, 'no inline style');
    const src = /<script src="([^"]+)"/.exec(html)?.[1];
    assert.ok(src, 'a script file');
    const script = await fetch(`${web.url}${src}`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get('content-type') ?? '', /javascript/);
    assert.match(await script.text(), /EventSource/);
  } finally {
    await web.stop();
  }
});
