// The management page in headless Chromium (playwright-core with the system chromium): log in,
// pause, resume, trigger and a small backfill, each checked in Temporal and PostgreSQL; the heat
// map fills without a reload; access and CSRF are enforced. A screenshot is kept.
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { test } from 'node:test';
import { chromium } from 'playwright-core';
import { memoryLogger } from '../../activities/logger.js';
import { loadConfig } from '../../config/env.js';
import { defineCatalog } from '../../schedules/job.js';
import { scheduleIdOf, syncSchedules } from '../../schedules/sync.js';
import { startWebServer } from '../../web/server.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../helpers/temporal.js';

const stack = realStack();
const TOKEN = 'web-test-token-7c1e';

test('the management page: pause, resume, trigger and a backfill from the browser', async () => {
  const job = 'web-sales';
  const taskQueue = uniqueQueue('web');
  const catalog = defineCatalog([salesJob(job, { start: '2026-05-20T00:00:00Z', lateness: '0m' })]);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TIDEMARK_TASK_QUEUE: taskQueue,
  });
  await syncSchedules(stack.env.client, catalog, { taskQueue, apply: true });
  await insertOrders(stack.t.db, ordersBetween(job, '2026-05-20T00:00:00Z', '2026-05-20T06:00:00Z', 60));
  const web = await startWebServer({
    port: 0,
    token: TOKEN,
    db: stack.t.db,
    client: stack.env.client,
    catalog,
    config,
  });
  const browser = await chromium.launch({
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
  try {
    // Access and CSRF.
    assert.equal((await fetch(`${web.url}/api/state`)).status, 401);
    const login = await fetch(`${web.url}/login`, {
      method: 'POST',
      body: `token=${TOKEN}`,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      redirect: 'manual',
    });
    const cookie = login.headers.get('set-cookie')!.split(';')[0]!;
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
    assert.equal(
      (
        await fetch(`${web.url}/login`, {
          method: 'POST',
          body: 'token=wrong',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          redirect: 'manual',
        })
      ).status,
      401,
    );

    await withWorker(
      stack.env,
      taskQueue,
      { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
      async () => {
        const page = await browser.newPage();
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
        // The heat map fills as the backfill runs, without a reload.
        await page.locator(`.grid[data-job="${job}"] .cell.done`).nth(5).waitFor({ timeout: 30_000 });
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
      },
    );
  } finally {
    await browser.close();
    await web.stop();
  }
});
