// The window grid and window detail views in headless Chromium, on a job with done, failed,
// running, rerun, missing and not-closed windows and one e-mail effect: cells, legend counts and
// filters, details on hover and focus in the job's zone and UTC, the detail's sections, axe-core
// with no serious or critical violation, no CSP refusal, screenshots in test-artifacts/.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Browser } from 'playwright-core';
import { type WindowHandler } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import { checkAccessibility, launchBrowser, loggedInPage, screenshot } from '../../helpers/browser.js';
import { depsWithChannels, loopbackChannels, summaryWithMail } from '../../helpers/effects.js';
import { gatedHandler, insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { approvedRerun } from '../../helpers/reruns.js';
import { eventually, realStack, uniqueQueue, windowPolicy, withWorker } from '../../helpers/temporal.js';
import { startWeb } from '../../helpers/web.js';

const stack = realStack();
const channels = loopbackChannels();
const TOKEN = 'window-views-token-93';
const job = 'browse';
const at = (d: number, h: number) =>
  `2026-06-${String(d).padStart(2, '0')}T${String(h).padStart(2, '0')}:00:00Z`;
const EFFECT_WINDOW = at(9, 10);

test('the window grid and the window detail in the browser', async () => {
  const gate = gatedHandler();
  const mail = summaryWithMail((c, applied) => ({ subject: `orders ${c.key}`, text: `${applied} orders` }));
  const handler: WindowHandler = async (ctx) => {
    const start = ctx.window.start.toISOString().replace('.000Z', 'Z');
    if (start === at(9, 5)) throw new Error('the orders replica is unreachable (test)');
    if (start !== EFFECT_WINDOW) return await gate.handler(ctx);
    return await mail(ctx);
  };
  const catalog = defineCatalog([
    salesJob(job, {
      start: at(8, 0),
      timezone: 'Europe/Berlin',
      lateness: '0m',
      handler,
      retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms' },
    }),
    salesJob(`${job}-1m`, { grid: '1m', start: at(7, 0), timezone: 'Europe/Berlin', lateness: '0m' }),
  ]);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, at(8, 0), at(9, 22), 460));
  const deps = depsWithChannels(stack.t.db, catalog, channels.smtp, channels.chat);
  const client = stack.env.client;
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog,
    env: { TIDEMARK_TASK_QUEUE: taskQueue, TIDEMARK_WEB_UI_URL: 'http://temporal-ui.test:8233' },
    now: () => new Date('2026-06-09T21:30:00Z'),
  });
  let browser: Browser | undefined;
  await withWorker(stack.env, taskQueue, deps, async () => {
    try {
      channels.smtp.plan.push('defer');
      // 42 windows by a backfill (one of them fails), then a rerun of 02:00 approved by bob.
      await client.workflow
        .execute('backfill', {
          taskQueue,
          workflowId: `${job}/backfill`,
          args: [{ job, from: at(8, 0), to: at(9, 18), concurrency: 4 }],
        })
        .catch(() => undefined);
      await approvedRerun(client, taskQueue, job, at(9, 2));
      // 19:00 held open: running.
      gate.hold(`${job}/${at(9, 19)}`);
      const held = await client.workflow.start('window', {
        taskQueue,
        workflowId: `${job}/${at(9, 19)}`,
        args: [
          {
            job,
            start: at(9, 19),
            end: at(9, 20),
            generation: 0,
            key: `${job}/${at(9, 19)}`,
            trigger: 'manual',
            policy: windowPolicy(1, 60_000),
          },
        ],
      });
      await eventually(async () => (gate.entered(`${job}/${at(9, 19)}`) ? true : undefined));

      browser = await launchBrowser();
      const { page, problems } = await loggedInPage(browser, web.url, TOKEN);
      // The shell renders a view on its first update and on each hash change: once the overview is
      // shown, a hash change renders exactly once, and the view's heading says it is there.
      await page.locator('section.view[data-view=overview]').waitFor();
      const show = async (hash: string, heading: string | RegExp) => {
        await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
        await page.locator('.wv h1', { hasText: heading }).waitFor();
      };

      // The grid: its cells by state, once the held window shows running.
      await eventually(
        async () => {
          await page.evaluate("location.hash = '#/'");
          await page.locator('section.view[data-view=overview]').waitFor();
          await show(`#/jobs/${job}`, `${job}: windows`);
          return (await page.locator('.wg-cell.s-running').count()) === 1 ? true : undefined;
        },
        20_000,
        'the held window to show running',
      );
      const count = (state: string) => page.locator(`.wg-cell.s-${state}`).count();
      assert.deepEqual(
        [
          await count('done'),
          await count('failed'),
          await count('running'),
          await count('missing'),
          await count('not-closed'),
        ],
        [41, 1, 1, 2, 1],
      );
      assert.equal(await page.locator('.wg-cell.wg-rerun').count(), 1, 'the rerun is marked');
      assert.equal(
        await page.locator('.wg-filter', { hasText: 'failed' }).locator('.wg-count').textContent(),
        '1',
      );
      // Hover and focus show the window in Berlin time and UTC.
      const failed = page.locator('.wg-cell.s-failed');
      await failed.hover();
      const details = page.locator('.wg-details');
      assert.match((await details.textContent())!, /2026-06-09 07:00 – 08:00 Europe\/Berlin \(UTC\+02:00\)/);
      assert.match((await details.textContent())!, /2026-06-09 05:00 – 06:00 UTC/);
      assert.match((await details.textContent())!, /orders replica is unreachable/);
      await page.locator('.wg-cell.wg-rerun').focus();
      assert.match((await details.textContent())!, /Generation1 \(rerun\)/);
      assert.equal(
        await page.locator('.wg-cell.wg-rerun').getAttribute('href'),
        `#/jobs/${job}/windows/${encodeURIComponent(`${job}/${at(9, 2)}`)}`,
      );
      // Keyboard: the cells are links in the tab order.
      assert.equal(await page.evaluate("document.activeElement.matches('.wg-cell.wg-rerun')"), true);
      // Enter on the focused cell opens the window's detail.
      await page.keyboard.press('Enter');
      await page.locator('.wv h2', { hasText: 'Ledger' }).waitFor();
      assert.match(await page.evaluate('location.hash'), new RegExp(`^#/jobs/${job}/windows/`));
      assert.match((await page.locator('.wv h1').textContent())!, /2026-06-09 04:00 – 05:00 Europe\/Berlin/);
      await show(`#/jobs/${job}`, `${job}: windows`);
      // A filter hides the cells of its state.
      await page.locator('.wg-filter', { hasText: 'done' }).click();
      assert.equal(
        await page.locator('.wg-filter', { hasText: 'done' }).getAttribute('aria-pressed'),
        'false',
      );
      assert.equal(await page.locator('.wg-cell.s-done:visible').count(), 0);
      await page.locator('.wg-filter', { hasText: 'done' }).click();
      await checkAccessibility(page, 'the window grid');
      await screenshot(page, 'grid');
      // Dark: the same checks with the dark palette.
      await page.emulateMedia({ colorScheme: 'dark' });
      await checkAccessibility(page, 'the window grid, dark');
      await screenshot(page, 'grid-dark');
      await page.emulateMedia({ colorScheme: 'light' });
      await page.setViewportSize({ width: 390, height: 844 });
      assert.equal(
        await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth + 1'),
        true,
        'the page fits 390 px: the grid scrolls inside its region',
      );
      await screenshot(page, 'grid-390');
      await page.setViewportSize({ width: 1280, height: 900 });

      // The detail of the window with the e-mail effect.
      await show(
        `#/jobs/${job}/windows/${encodeURIComponent(`${job}/${EFFECT_WINDOW}`)}`,
        '2026-06-09 12:00',
      );
      const text = (await page.locator('.wv').textContent())!;
      for (const title of ['Ledger', 'Runs', 'Effects', 'Incidents', 'Rerun history'])
        assert.ok(await page.locator('h2', { hasText: title }).isVisible(), title);
      assert.match(text, /2026-06-09 12:00 – 13:00 Europe\/Berlin \(UTC\+02:00\)/);
      assert.match(text, /2026-06-09 10:00 – 11:00 UTC/);
      const effect = page.locator('article.effect');
      assert.match((await effect.textContent())!, /report \(email\)/);
      const tries = await effect.locator('tbody tr').allTextContents();
      assert.equal(tries.length, 2);
      assert.match(tries[0]!, /failed.*451/);
      assert.match(tries[1]!, /done/);
      assert.match(
        (await effect.textContent())!,
        new RegExp(channels.smtp.messages.at(-1)!.messageId!.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')),
      );
      assert.equal(
        await page.locator('a', { hasText: 'Temporal Web UI' }).getAttribute('href'),
        `http://temporal-ui.test:8233/namespaces/${stack.env.namespace ?? 'default'}/workflows/${encodeURIComponent(`${job}/${EFFECT_WINDOW}`)}`,
      );
      assert.ok(await page.locator('button', { hasText: 'Request a rerun' }).isVisible());
      await checkAccessibility(page, 'the window detail');
      await screenshot(page, 'window-detail');
      // Request a rerun of this done window from its detail: it waits for approval, and shows so.
      await page.fill('#rerun-reason', 'the report went to the wrong list');
      await page.fill('#rerun-by', 'carol');
      await page.click('button:has-text("Request a rerun")');
      await page
        .locator('section[aria-labelledby=reruns]')
        .getByText('Generation 1: pending — asked by carol: “the report went to the wrong list”')
        .waitFor();
      assert.equal(
        await page.locator('button', { hasText: 'Request a rerun' }).count(),
        0,
        'one open request at a time',
      );
      const asked = await stack.t.db
        .selectFrom('rerun_requests')
        .select(['workflow_id', 'requested_by', 'generation', 'status'])
        .where('job', '=', job)
        .where('window_start', '=', new Date(EFFECT_WINDOW))
        .executeTakeFirstOrThrow();
      assert.deepEqual([asked.requested_by, asked.generation, asked.status], ['carol', 1, 'pending']);
      await client.workflow.getHandle(asked.workflow_id).terminate('test over');

      // The rerun's detail: its history with bob's decision.
      await show(`#/jobs/${job}/windows/${encodeURIComponent(`${job}/${at(9, 2)}`)}`, '2026-06-09 04:00');
      const history = (await page.locator('section[aria-labelledby=reruns]').textContent())!;
      assert.match(history, /Generation 1: done — asked by alice: “late orders”/);
      assert.match(history, /approve by bob via web \(not verified\): accepted/);

      // A minutely job: hours of windows; one drills into its minutes and back.
      await show(`#/jobs/${job}-1m`, `${job}-1m: windows`);
      const hours = page.locator('button.wg-cell');
      assert.equal(await hours.count(), 70, 'hours from 02:00 on the 7th to 23:31 on the 9th, local');
      await page.locator('button.wg-cell[aria-label^="2026-06-09 12:00 – 13:00 Europe/Berlin"]').click();
      await page.locator('button', { hasText: 'Back to the whole range' }).waitFor();
      assert.equal(await page.locator('a.wg-cell').count(), 60);
      assert.match((await page.locator('.wg-grid tbody th').textContent())!, /2026-06-09 12:00 \(\+02:00\)/);
      await checkAccessibility(page, 'an hour of a minutely job');
      await screenshot(page, 'grid-minutely-hour');
      await page.locator('button', { hasText: 'Back to the whole range' }).click();
      await page.locator('button.wg-cell').first().waitFor();
      assert.equal(await page.locator('button.wg-cell').count(), 70);
      assert.deepEqual(problems, { refused: [], errors: [] }, 'no CSP refusal, no page error');
      gate.release(`${job}/${at(9, 19)}`);
      await held.result();
    } finally {
      gate.release(`${job}/${at(9, 19)}`);
      await browser?.close();
      await web.stop();
    }
  });
});
