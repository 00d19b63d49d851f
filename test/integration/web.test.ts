// The management page in headless Chromium (playwright-core with the system chromium): log in,
// pause, resume, trigger and a small backfill, each checked in Temporal and PostgreSQL; the heat
// map fills without a reload; access and CSRF are enforced. A screenshot is kept.
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { test } from 'node:test';
import { chromium, type Browser } from 'playwright-core';
import { memoryLogger } from '../../activities/logger.js';
import { defineCatalog } from '../../schedules/job.js';
import { scheduleIdOf, syncSchedules } from '../../schedules/sync.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../helpers/web.js';

const stack = realStack();
const TOKEN = 'web-test-token-7c1e';

test('the management page: pause, resume, trigger and a backfill from the browser', async () => {
  const job = 'web-sales';
  const taskQueue = uniqueQueue('web');
  const catalog = defineCatalog([salesJob(job, { start: '2026-05-20T00:00:00Z', lateness: '0m' })]);
  await syncSchedules(stack.env.client, catalog, { taskQueue, apply: true });
  await insertOrders(stack.t.db, ordersBetween(job, '2026-05-20T00:00:00Z', '2026-05-20T06:00:00Z', 60));
  const web = await startWeb(stack, { token: TOKEN, catalog, env: { TIDEMARK_TASK_QUEUE: taskQueue } });
  let browser: Browser | undefined;
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    // Access and CSRF.
    assert.equal((await fetch(`${web.url}/api/state`)).status, 401);
    const login = await postLogin(web.url, TOKEN);
    const cookie = sessionCookie(login);
    assert.match(login.headers.get('set-cookie')!, /HttpOnly; SameSite=Strict/);
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
        const page = await browser!.newPage();
        // Under the CSP the page's own script and style load; anything it refuses shows here.
        const refused: string[] = [];
        page.on('console', (m) => {
          if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
        });
        await page.goto(web.url);
        await page.fill('input[name=token]', TOKEN);
        await page.click('text=Log in');
        const row = page.locator(`tr[data-job="${job}"]`);
        await row.waitFor();
        const schedule = stack.env.client.schedule.getHandle(scheduleIdOf(job));

        await row.locator('button[data-action=pause]').click();
        await row.locator('.state', { hasText: 'paused' }).waitFor();
        assert.equal((await schedule.describe()).state.paused, true);
        await row.locator('button[data-action=resume]').click();
        await row.locator('.state', { hasText: 'active' }).waitFor();
        assert.equal((await schedule.describe()).state.paused, false);

        await row.locator('button[data-action=trigger]').click();
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

        await page.selectOption('#backfill select[name=job]', job);
        await page.fill('#backfill input[name=from]', '2026-05-20T00:00:00Z');
        await page.fill('#backfill input[name=to]', '2026-05-20T06:00:00Z');
        await page.click('#backfill button');
        // The heat map fills as the backfill runs, without a reload. The tick triggered above
        // processes windows of its own (later ones too), so wait for the backfill's six by key.
        for (let h = 0; h < 6; h++)
          await page
            .locator(`.grid[data-job="${job}"] .cell.done[title^="${job}/2026-05-20T0${h}:00:00Z "]`)
            .waitFor({ timeout: 60_000 });
        const done = await stack.t.db
          .selectFrom('job_windows')
          .select('window_start')
          .where('job', '=', job)
          .where('status', '=', 'done')
          .where('window_start', '<', new Date('2026-05-20T06:00:00Z'))
          .execute();
        assert.equal(done.length, 6);
        // A rerun requested from the page waits for approval and shows among the pending approvals.
        await page.fill('#rerun input[name=window]', '2026-05-20T01:00:00Z');
        await page.fill('#rerun input[name=reason]', 'late refunds');
        await page.fill('#rerun input[name=by]', 'alice');
        await page.click('#rerun button');
        await page.locator('#approvals li', { hasText: 'late refunds' }).waitFor({ timeout: 20_000 });
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
        await mkdir('test-artifacts', { recursive: true });
        await page.screenshot({ path: 'test-artifacts/management-page.png', fullPage: true });
        assert.deepEqual(refused, [], 'nothing refused by the CSP');

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
