// The page's shell, overview and backfills in headless Chromium against the real stack: each view
// checked by axe-core (no serious or critical violation), with a screenshot under test-artifacts/.
// The overview at desktop width, at 390 px and in dark mode; Trigger reached and pressed with the
// keyboard alone; a backfill previewed (dry run), started and followed to the end.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Browser } from 'playwright-core';
import { memoryLogger } from '../../../activities/logger.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { defineCatalog } from '../../../schedules/define.js';
import { syncSchedules } from '../../../workers/schedule-sync.js';
import { scheduleIdOf } from '../../../contract/schedule-ids.js';
import {
  checkAccessibility,
  jobCard,
  launchBrowser,
  loggedInPage,
  screenshot,
} from '../../helpers/browser.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, windowByHand, withWorker } from '../../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';

const stack = realStack();
const TOKEN = 'web-views-token-5d2a';
let browser: Browser;
before(async () => {
  browser = await launchBrowser();
});
after(async () => {
  await browser?.close();
});

test('overview: a card per job with schedule in words and cron, health and actions; 390 px, dark; Tab then Enter triggers', async () => {
  const hourly = 'views-hourly';
  const daily = 'views-daily';
  const taskQueue = uniqueQueue('views');
  const catalog = defineCatalog([
    salesJob(hourly, {
      description: 'sums each closed hour of orders',
      start: '2026-05-20T00:00:00Z',
      lateness: '5m',
    }),
    salesJob(daily, {
      description: 'a daily roll-up in Berlin time',
      grid: 'day',
      timezone: 'Europe/Berlin',
      tick: { cron: '15 0 * * *' },
      start: '2026-05-20T00:00:00+02:00',
    }),
  ]);
  await insertOrders(stack.t.db, ordersBetween(hourly, '2026-05-20T00:00:00Z', '2026-05-20T03:00:00Z', 30));
  const web = await startWeb(stack, { token: TOKEN, catalog, env: { TIDEMARK_TASK_QUEUE: taskQueue } });
  try {
    await withWorker(
      stack.env,
      taskQueue,
      { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
      async () => {
        for (const h of ['00', '01', '02'])
          await windowByHand(
            stack.env.client,
            taskQueue,
            hourly,
            `2026-05-20T${h}:00:00Z`,
            `2026-05-20T${String(Number(h) + 1).padStart(2, '0')}:00:00Z`,
          );
      },
    );
    // Synced once the worker is gone: a tick its schedule fires (at +5m each hour) finds no worker,
    // and the card shows the three windows done by hand, not those a tick caught up meanwhile.
    await syncSchedules(stack.env.client, catalog, { taskQueue, apply: true });
    const login = await (await browser.newContext()).newPage();
    await login.goto(web.url);
    await login.locator('input[name=token]').waitFor();
    await checkAccessibility(login, 'the login form');
    await screenshot(login, 'login');

    const { page, problems } = await loggedInPage(browser, web.url, TOKEN);
    const card = await jobCard(page, hourly);
    // Missing: closed hours since the job's start that nothing recorded (lateness 5m).
    const closedHours = () =>
      Math.floor((Date.now() - 300_000 - Date.parse('2026-05-20T00:00:00Z')) / 3_600_000);
    const hoursBefore = closedHours();
    const text = await card.innerText();
    if (closedHours() === hoursBefore) assert.match(text, new RegExp(`${hoursBefore - 3}\\s+missing`), text);
    assert.match(text, /every hour, 5m after each boundary \(UTC\)/);
    assert.match(text, /interval every 1h offset 5m/);
    assert.match(text, /3\s+done/, text);
    assert.match(text, /0\s+failed/);
    assert.match(text, /processed\s+in \d+ ms/, 'the last run');
    const dailyText = await (await jobCard(page, daily)).innerText();
    assert.match(dailyText, /every day at 00:15 \(Europe\/Berlin\)/);
    assert.match(dailyText, /cron 15 0 \* \* \*/);
    // The next fire in Berlin time and in UTC: 00:15 local is 22:15 or 23:15 UTC.
    assert.match(
      dailyText,
      /Next fire\s+\d{4}-\d\d-\d\d 00:15 GMT\+[12]\s+\d{4}-\d\d-\d\d 2[23]:15 UTC/i,
      dailyText,
    );
    assert.equal(await card.locator('img.spark').getAttribute('src'), `/api/jobs/${hourly}/durations.svg`);
    await checkAccessibility(page, 'the overview');
    await screenshot(page, 'overview');

    // Keyboard only: Tab from the top of the page reaches the first job's Trigger; Enter presses it.
    const schedule = stack.env.client.schedule.getHandle(scheduleIdOf(daily));
    const before = (await schedule.describe()).info.recentActions.length;
    await page.locator('.brand').focus();
    let reached = false;
    for (let i = 0; i < 80 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(
        `document.activeElement?.dataset.action === 'trigger' && document.activeElement.closest('article').dataset.job === ${JSON.stringify(daily)}`,
      );
    }
    assert.ok(reached, 'Tab reaches the Trigger button');
    await page.keyboard.press('Enter');
    await eventually(
      async () => ((await schedule.describe()).info.recentActions.length > before ? true : undefined),
      20_000,
      'the schedule triggered from the keyboard',
    );
    await page.locator('#msg', { hasText: `${daily}: triggered` }).waitFor();
    assert.deepEqual(problems, { refused: [], errors: [] });

    const narrow = await loggedInPage(browser, web.url, TOKEN, { width: 390, height: 844 });
    await jobCard(narrow.page, hourly);
    const overflow = await narrow.page.evaluate('document.documentElement.scrollWidth');
    assert.ok((overflow as number) <= 390, `no sideways scrolling at 390 px (${String(overflow)} px wide)`);
    await checkAccessibility(narrow.page, 'the overview at 390 px');
    await screenshot(narrow.page, 'overview-390px');

    const dark = await loggedInPage(browser, web.url, TOKEN, { colorScheme: 'dark' });
    await jobCard(dark.page, hourly);
    const background = await dark.page.evaluate('getComputedStyle(document.body).backgroundColor');
    assert.equal(background, 'rgb(17, 19, 24)', 'the dark palette');
    await checkAccessibility(dark.page, 'the overview in dark mode');
    await screenshot(dark.page, 'overview-dark');

    // Each card leads to the backfills view with its job chosen.
    await page.locator(`article.job[data-job="${daily}"] a`, { hasText: 'Backfill…' }).click();
    assert.equal(await page.locator('#bf-job').inputValue(), daily, 'not the first job of the list');

    // A view that does not exist says so instead of breaking the page (#/incidents exists now).
    await page.goto(`${web.url}/#/no-such-view`);
    await page.locator('text=This view is not available yet.').waitFor();
  } finally {
    await web.stop();
  }
});

test('backfills: a dry-run preview (done windows counted as skipped), start, and progress to the end', async () => {
  const job = 'views-backfill';
  const taskQueue = uniqueQueue('views-bf');
  const failing = '2026-05-21T03:00:00.000Z';
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-05-21T00:00:00Z',
      lateness: '0m',
      timezone: 'Europe/Berlin',
      retry: { maximumAttempts: 1 },
      // One window of the range fails: the backfill must show as failed, not as 5 of 6 done.
      handler: async (ctx) => {
        if (ctx.window.start.toISOString() === failing) throw new Error('the source is unreachable');
        return summariseWindow(ctx);
      },
    }),
  ]);
  await insertOrders(stack.t.db, ordersBetween(job, '2026-05-21T00:00:00Z', '2026-05-21T06:00:00Z', 60));
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog,
    env: { TIDEMARK_TASK_QUEUE: taskQueue, TIDEMARK_WEB_MAX_BACKFILL_WINDOWS: '24' },
  });
  try {
    await withWorker(
      stack.env,
      taskQueue,
      { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
      async () => {
        for (const h of ['00', '01'])
          await windowByHand(
            stack.env.client,
            taskQueue,
            job,
            `2026-05-21T${h}:00:00Z`,
            `2026-05-21T0${Number(h) + 1}:00:00Z`,
          );

        // The preview reads the range in the job's zone unless told UTC.
        const cookie = sessionCookie(await postLogin(web.url, TOKEN));
        const html = await (await fetch(web.url, { headers: { cookie } })).text();
        const csrf = /<meta name="csrf" content="([a-f0-9]+)"/.exec(html)![1]!;
        const preview = async (body: Record<string, string>) => {
          const r = await fetch(`${web.url}/api/jobs/${job}/backfill/preview`, {
            method: 'POST',
            headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          return { status: r.status, body: (await r.json()) as Record<string, unknown> };
        };
        const local = await preview({ from: '2026-05-21T02:00', to: '2026-05-21T08:00' });
        assert.equal(local.status, 200, JSON.stringify(local.body));
        assert.deepEqual(
          [local.body.from, local.body.to, local.body.windows, local.body.alreadyDone, local.body.toProcess],
          ['2026-05-21T00:00:00Z', '2026-05-21T06:00:00Z', 6, 2, 4],
        );
        const bad = await preview({ from: 'yesterday', to: '2026-05-21T08:00' });
        assert.equal(bad.status, 400);
        assert.match(String(bad.body.error), /^from: "yesterday" is not a date/);
        const big = await preview({ from: '2026-05-01T00:00', to: '2026-05-21T00:00', zone: 'utc' });
        assert.equal(big.body.overLimit, true);

        const { page, problems } = await loggedInPage(browser, web.url, TOKEN, { hash: '#/backfills' });
        await page.locator('#bf-from').waitFor();
        // Past TIDEMARK_WEB_MAX_BACKFILL_WINDOWS (24 here) Start asks for a confirmation first.
        await page.check('#bf-zone-utc');
        await page.fill('#bf-from', '2026-05-01T00:00');
        await page.fill('#bf-to', '2026-05-03T00:00');
        await page.click('#bf-preview-button');
        await page.locator('#bf-preview .warn', { hasText: 'more than the limit of 24 windows' }).waitFor();
        await page.click('#bf-start');
        await page.locator('#msg', { hasText: 'Tick "I mean it"' }).waitFor();
        assert.equal(
          (await stack.env.client.workflow.count(`WorkflowType = "backfill" AND TidemarkJob = "${job}"`))
            .count,
          0,
          'nothing started without the confirmation',
        );
        await page.check('#bf-zone-utc');
        await page.fill('#bf-from', '2026-05-21T00:00');
        await page.fill('#bf-to', '2026-05-21T06:00');
        await page.click('#bf-preview-button');
        const shown = page.locator('#bf-preview');
        await shown.locator('text=to process').waitFor();
        const text = await shown.innerText();
        assert.match(
          text,
          /6 windows of views-backfill start in \[2026-05-21T00:00:00Z, 2026-05-21T06:00:00Z\)/,
        );
        assert.match(
          text,
          /First window: 2026-05-21T02:00:00 \+02:00 Europe\/Berlin \(2026-05-21T00:00:00Z\)/,
        );
        assert.match(
          text,
          /Last window: 2026-05-21T07:00:00 \+02:00 Europe\/Berlin \(2026-05-21T05:00:00Z\)/,
        );
        assert.match(text, /2 already done: skipped, not re-applied/);
        assert.match(text, /4 to process/);
        await checkAccessibility(page, 'the backfill preview');
        await screenshot(page, 'backfill-preview');
        await page.click('#bf-start');
        const row = page.locator(
          `li.backfill[data-workflow="${job}/backfill-2026-05-21T00:00:00Z-2026-05-21T06:00:00Z"]`,
        );
        await row.waitFor({ timeout: 20_000 });
        // It ends with one window failed: shown as a failed backfill, the window named.
        await row.locator('.badge.failed', { hasText: 'Completed' }).waitFor({ timeout: 60_000 });
        const progress = await row.innerText();
        assert.match(progress, /5\s+done \(2 were done already\)/, progress);
        assert.match(progress, /1\s+failed/);
        assert.match(progress, /Failed windows: views-backfill\/2026-05-21T03:00:00Z/);
        await checkAccessibility(page, 'the backfill progress');
        await screenshot(page, 'backfill-progress');
        assert.deepEqual(problems, { refused: [], errors: [] });
      },
    );
  } finally {
    await web.stop();
  }
});

test('the job list: search, filters and sorting kept in the link; a card opened stays open; 390 px', async () => {
  const names = Array.from({ length: 24 }, (_, i) => `list-${i}`);
  const catalog = defineCatalog(
    names.map((n, i) =>
      salesJob(n, {
        // Only the two with a watermark declare a start: a job with a start that never ticked is
        // behind from it, so it would count as behind too.
        ...(i === 4 || i === 5 ? { start: '2026-06-01T00:00:00Z' } : {}),
        ...(i === 6 ? { grid: '1d', description: 'the shop in Lyon' } : {}),
      }),
    ),
  );
  const schedule = (job: string, paused: boolean) =>
    stack.env.client.schedule.create({
      scheduleId: scheduleIdOf(job),
      spec: { intervals: [{ every: '1h' }] },
      action: { type: 'startWorkflow', workflowType: 'nothing', taskQueue: 'list-none', args: [] },
      state: { paused, ...(paused ? { note: 'db upgrade' } : {}) },
    });
  const handles = [await schedule('list-1', true), await schedule('list-2', false)];
  const { db } = stack.t;
  await db
    .insertInto('job_runs')
    .values({
      job: 'list-3',
      kind: 'window',
      window_start: new Date('2026-06-01T00:00:00Z'),
      started_at: new Date(),
      finished_at: new Date(),
      duration_ms: 5,
      outcome: 'failed',
      reason: 'boom',
    })
    .execute();
  await db
    .insertInto('job_watermarks')
    .values([
      { job: 'list-4', watermark: new Date('2026-06-01T00:00:00Z'), updated_at: new Date() },
      { job: 'list-5', watermark: new Date('2026-09-01T00:00:00Z'), updated_at: new Date() },
    ])
    .execute();
  const web = await startWeb(stack, { token: TOKEN, catalog, env: {} });
  try {
    const { page, problems } = await loggedInPage(browser, web.url, TOKEN);
    const shown = () =>
      page
        .locator('table.job-list tr[data-job]:not(.filtered)')
        .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-job')));
    await page.locator('table.job-list tr[data-job="list-23"]').waitFor();
    assert.equal((await shown()).length, 24);
    await page.locator('.jl-count', { hasText: '24 jobs' }).waitFor();

    assert.match(await page.locator('tr[data-job="list-3"] td.jl-last').innerText(), /^failed \d+ \w+ ago$/);
    // Search by name or description, as typed.
    await page.fill('#jl-q', 'list-1');
    assert.deepEqual(await shown(), ['list-1', ...Array.from({ length: 10 }, (_, i) => `list-1${i}`)]);
    await page.locator('.jl-count', { hasText: '11 of 24 jobs' }).waitFor();
    assert.match(page.url(), /#\/\?q=list-1$/, 'the filter is in the link');
    await page.fill('#jl-q', 'lyon');
    assert.deepEqual(await shown(), ['list-6']);
    await page.fill('#jl-q', '');

    // Filters: state, window size, lag, failures; each alone, then back to all.
    for (const [select, value, jobs] of [
      ['#jl-state', 'paused', ['list-1']],
      ['#jl-state', 'active', ['list-2']],
      ['#jl-grid', '1d', ['list-6']],
      ['#jl-lag', 'behind', ['list-4', 'list-5']],
      ['#jl-failures', 'failing', ['list-3']],
    ] as const) {
      await page.selectOption(select, value);
      await page.locator(`table.job-list tr[data-job="${jobs[0]}"]:not(.filtered)`).waitFor();
      assert.deepEqual(await shown(), [...jobs], `${select} = ${value}`);
      await page.selectOption(select, '');
    }
    // Sorted by lag: the job furthest behind first; the link keeps the order.
    await page.selectOption('#jl-sort', 'lag');
    assert.deepEqual((await shown()).slice(0, 2), ['list-4', 'list-5']);
    assert.match(page.url(), /sort=lag/);
    const shared = page.url();

    // A card opened stays open across a reload; the others stay lines.
    await page.locator('tr[data-job="list-1"] button.jl-open').click();
    const card = page.locator('article.job[data-job="list-1"]');
    await card.locator('.state', { hasText: 'paused: db upgrade' }).waitFor();
    await page.reload();
    await page.locator('article.job[data-job="list-1"]').waitFor();
    assert.equal(await page.locator('article.job').count(), 1, 'only the card opened');
    assert.equal(page.url(), shared);
    assert.deepEqual((await shown()).slice(0, 2), ['list-4', 'list-5'], 'the order from the link');
    await checkAccessibility(page, 'the job list');
    await screenshot(page, 'overview-list');

    const narrow = await loggedInPage(browser, web.url, TOKEN, { width: 390, height: 844 });
    // Stylesheets that come late still come before the list is drawn: nothing is ever drawn unstyled.
    await narrow.page.route('**/*.css', async (r) => {
      await sleep(1000);
      await r.continue();
    });
    await narrow.page.reload();
    await narrow.page.locator('table.job-list tr[data-job="list-23"]').waitFor();
    const overflow = (await narrow.page.evaluate('document.documentElement.scrollWidth')) as number;
    assert.ok(overflow <= 390, `no sideways scrolling at 390 px (${overflow} px wide)`);
    await checkAccessibility(narrow.page, 'the job list at 390 px');
    await screenshot(narrow.page, 'overview-list-390px');
    assert.deepEqual(problems, { refused: [], errors: [] });
  } finally {
    await web.stop();
    for (const h of handles) await h.delete();
  }
});

test('the job list keeps the focus while other jobs change, and draws the jobs of a restarted server', async () => {
  const names = ['focus-a', 'focus-b', 'focus-c'];
  const specs = names.map((n) => salesJob(n, { start: '2026-06-01T00:00:00Z' }));
  const handle = await stack.env.client.schedule.create({
    scheduleId: scheduleIdOf('focus-a'),
    spec: { intervals: [{ every: '1h' }] },
    action: { type: 'startWorkflow', workflowType: 'nothing', taskQueue: 'focus-none', args: [] },
    state: { paused: false },
  });
  let web = await startWeb(stack, { token: TOKEN, catalog: defineCatalog(specs), env: {} });
  const port = Number(new URL(web.url).port);
  try {
    const { page, problems } = await loggedInPage(browser, web.url, TOKEN);
    const card = await jobCard(page, 'focus-a');
    await card.locator('button[data-action=pause]').click();
    const reason = card.locator('input[name=reason]');
    await reason.pressSequentially('disk f');
    // Another job's row changes (its last run) while the reason is being typed.
    await stack.t.db
      .insertInto('job_runs')
      .values({
        job: 'focus-b',
        kind: 'window',
        window_start: new Date('2026-06-01T00:00:00Z'),
        started_at: new Date(),
        finished_at: new Date(),
        duration_ms: 3,
        outcome: 'processed',
      })
      .execute();
    await page.locator('tr[data-job="focus-b"] td.jl-last', { hasText: 'processed' }).waitFor();
    assert.equal(await page.evaluate('document.activeElement.id'), 'reason-focus-a', 'the focus stayed');
    await page.keyboard.type('ull');
    assert.equal(await reason.inputValue(), 'disk full');

    // The server restarts with one job more: the page, reconnected, lists it.
    await web.stop();
    web = await startWeb(stack, {
      token: TOKEN,
      port,
      catalog: defineCatalog([...specs, salesJob('focus-d', { start: '2026-06-01T00:00:00Z' })]),
      env: {},
    });
    await page.locator('table.job-list tr[data-job="focus-d"]').waitFor({ timeout: 60_000 });
    await page.locator('.jl-count', { hasText: '4 jobs' }).waitFor();
    assert.deepEqual(problems, { refused: [], errors: [] });
  } finally {
    await web.stop();
    await handle.delete();
  }
});
