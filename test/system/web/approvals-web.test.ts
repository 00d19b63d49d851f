// Pending approvals on the page: GET /api/approvals lists each request with its preview; the
// decision goes through decide() with the CLI's rules (a known name, never the requester); in
// headless Chromium the view shows the day's count and total before and after next to Approve /
// Reject, passes axe-core, and approving there applies exactly the previewed change.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Browser } from 'playwright-core';
import { sql } from 'kysely';
import type { PendingApproval } from '../../../operator/reruns.js';
import type { RerunResult } from '../../../contract/workflows.js';
import { memoryLogger } from '../../../activities/logger.js';
import { defineCatalog } from '../../../schedules/define.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { rerunTools } from '../../helpers/reruns.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';
import { checkAccessibility, launchBrowser, loggedInPage, screenshot } from '../../helpers/browser.js';
import { startWeb } from '../../helpers/web.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

const stack = realStack();
const { processWindow, startRerun, waitForRequest } = rerunTools(stack);
const TOKEN = 'approvals-test-token-93b2';

test('the approvals view: each pending request with its preview next to Approve / Reject; approving applies it', async () => {
  const job = 'web-approvals';
  const W = { start: '2026-07-01T10:00:00Z', end: '2026-07-01T11:00:00Z' };
  // A job in Berlin: the page shows its window in the job's zone and in UTC.
  const catalog = defineCatalog([
    salesJob(job, { start: W.start, lateness: '0m', timezone: 'Europe/Berlin' }),
  ]);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, 6));
  const deps = { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() };
  const web = await startWeb(stack, {
    token: TOKEN,
    catalog: deps.catalog,
    env: { TIDEMARK_TASK_QUEUE: taskQueue, TIDEMARK_APPROVERS: 'bob=UBOB', TIDEMARK_PEOPLE: 'alice=UALICE' },
  });
  const api = (path: string, body?: unknown) =>
    fetch(`${web.url}${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
  let browser: Browser | undefined;
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      await processWindow(taskQueue, job, W);
      await insertOrders(stack.t.db, [{ key: `${job}-late`, at: '2026-07-01T10:45:00Z', amount: 120 }]);
      const handle = await startRerun(taskQueue, job, W, 1, { reason: 'a late order <b>bold</b>' });
      await waitForRequest(handle.workflowId);

      const listed = (await (await api('/api/approvals')).json()) as { approvals: PendingApproval[] };
      assert.equal(listed.approvals.length, 1);
      const a = listed.approvals[0]!;
      const row = a.preview!.tables![0]!.rows[0]!;
      assert.deepEqual(
        [a.request, row.before!.order_count, row.after!.order_count],
        [handle.workflowId, '6', '7'],
      );

      // The CLI's rules: a name tidemark knows, and never the requester.
      const refused = await api('/api/approvals/approve', { request: a.request, by: 'alice' });
      assert.equal(refused.status, 409);
      assert.match(
        ((await refused.json()) as { error: string }).error,
        /alice asked for this rerun and may not approve it/,
      );
      const nameless = await api('/api/approvals/approve', { request: a.request, by: '' });
      assert.equal(nameless.status, 400);
      assert.match(((await nameless.json()) as { error: string }).error, /^by: your name is required/);
      assert.equal((await api('/api/approvals/maybe', { request: a.request, by: 'bob' })).status, 404);

      browser = await launchBrowser();
      const { page, problems } = await loggedInPage(browser, web.url, TOKEN, {
        width: 1100,
        height: 800,
        hash: '#/approvals',
      });
      const card = page.locator('article.pv-card');
      await card.waitFor();
      const text = await card.innerText();
      assert.match(text, /web-approvals: window 2026-07-01 12:00 GMT\+2 \(2026-07-01 10:00 UTC\)/);
      assert.match(text, /a late order <b>bold<\/b>/, 'the reason is text, not markup');
      assert.match(text, /daily_sales: 1 changed/);
      const cells = await card.locator('tbody tr').allInnerTexts();
      assert.deepEqual(
        cells.map((c) => c.split('\t').slice(-3)),
        [
          ['order_count', row.before!.order_count!, row.after!.order_count!],
          ['total', row.before!.total!, row.after!.total!],
        ],
      );
      await card.getByRole('button', { name: 'Approve' }).waitFor();

      await checkAccessibility(page, 'the approvals view');
      await screenshot(page, 'approvals');
      // Dark: the same view under prefers-color-scheme: dark, checked and kept too.
      const dark = await loggedInPage(browser, web.url, TOKEN, {
        width: 1100,
        height: 800,
        colorScheme: 'dark',
        hash: '#/approvals',
      });
      await dark.page.locator('article.pv-card').waitFor();
      await checkAccessibility(dark.page, 'the approvals view, dark');
      await screenshot(dark.page, 'approvals-dark');
      await dark.page.context().close();
      // At 390 px wide nothing runs off the side of the page (the table scrolls inside its box).
      await page.setViewportSize({ width: 390, height: 800 });
      assert.ok(((await page.evaluate('document.documentElement.scrollWidth')) as number) <= 390);
      await page.setViewportSize({ width: 1100, height: 800 });

      // Keyboard: the name field, then the note, then Approve.
      await page.fill('#approver-name', 'bob');
      await card.getByRole('button', { name: 'Approve' }).focus();
      await page.keyboard.press('Enter');
      await page.locator('.pv-status', { hasText: 'approved by bob' }).waitFor();
      const result = (await handle.result()) as RerunResult;
      assert.deepEqual([result.outcome, result.decidedBy], ['done', 'bob']);
      const day = await stack.t.db
        .withSchema(DEMO_SCHEMA)
        .selectFrom('daily_sales')
        .select(['order_count', sql<string>`total::text`.as('total')])
        .where('job', '=', job)
        .executeTakeFirstOrThrow();
      assert.deepEqual([String(day.order_count), day.total], [row.after!.order_count, row.after!.total]);
      await eventually(
        async () =>
          (await page.locator('.pv-list').innerText()).includes('No rerun waits') ? true : undefined,
        10_000,
        'the list empties',
      );
      assert.deepEqual([problems.refused, problems.errors], [[], []]);
    });
  } finally {
    await browser?.close();
    await web.stop();
  }
});
