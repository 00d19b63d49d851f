// The runbook every alert links to (`<TIDEMARK_WEB_URL>/runbook#<incident kind>`): the page's server
// serves docs/runbook.md to anyone, signed in or not (it holds no job data), with every incident
// kind's anchor in it, while the job data under /api still needs a sign-in.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { INCIDENT_KIND } from '../../../activities/alerts.js';
import { defineCatalog } from '../../../schedules/define.js';
import { salesJob } from '../../helpers/jobs.js';
import { realStack } from '../../helpers/temporal.js';
import { startWeb } from '../../helpers/web.js';

const stack = realStack();
const catalog = defineCatalog([salesJob('runbook', { start: '2026-06-01T00:00:00Z' })]);

test('/runbook answers without a session: docs/runbook.md as a page, every incident kind an anchor in it', async () => {
  const web = await startWeb(stack, { token: 'runbook-token-0123456', catalog, env: {} });
  try {
    const file = await readFile(new URL('../../../docs/runbook.md', import.meta.url), 'utf8');
    const md = await fetch(`${web.url}/runbook.md`);
    assert.equal(md.status, 200);
    assert.match(md.headers.get('content-type') ?? '', /^text\/markdown; charset=utf-8/);
    assert.equal(await md.text(), file, '/runbook.md serves docs/runbook.md as it is');

    const page = await fetch(`${web.url}/runbook`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html; charset=utf-8/);
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    const html = await page.text();
    assert.match(html, /<h1[^>]*>[^<]+<\/h1>/, 'rendered: the title is a heading, not a # line');
    assert.ok(!/^#{1,6} /m.test(html), 'no Markdown heading is left as text');
    assert.ok(!/<script/i.test(html), 'the page runs no script');
    for (const kind of Object.values(INCIDENT_KIND))
      assert.ok(html.includes(`<a id="${kind}"></a>`), `/runbook#${kind} has its anchor`);
    // Command blocks stay code, escaped: a quote or an angle bracket in a command is text.
    assert.match(html, /<pre><code class="language-sh">/);
    assert.equal((await fetch(`${web.url}/api/state`)).status, 401, 'job data still needs a sign-in');
  } finally {
    await web.stop();
  }
});

test('the runbook links other docs pages as the page serves them, and only files of docs/ are served', async () => {
  const web = await startWeb(stack, { token: 'runbook-token-0123456', catalog, env: {} });
  try {
    const html = await (await fetch(`${web.url}/runbook`)).text();
    const links = [...html.matchAll(/href="([^"#]+)(#[^"]*)?"/g)]
      .map((m) => m[1]!)
      .filter((h) => !/^https?:/.test(h) && h !== '/app.css');
    assert.ok(links.length > 0, 'the runbook links another page (restore.md, when verify fails)');
    for (const href of links) {
      assert.match(href, /^\/docs\/[a-z0-9/-]+\.md$/, `${href}: a docs page, absolute on the page`);
      const r = await fetch(`${web.url}${href}`);
      assert.equal(r.status, 200, href);
      assert.match(r.headers.get('content-type') ?? '', /^text\/html/, href);
    }
    const restore = await (await fetch(`${web.url}/docs/restore.md`)).text();
    assert.ok(
      restore.includes('id="when-verify-fails"'),
      "the verify table's heading is an anchor on the page",
    );
    for (const path of [
      '/docs/../package.json',
      '/docs/%2e%2e/package.json',
      '/docs/runbook.txt',
      '/docs/nope.md',
    ])
      assert.equal((await fetch(`${web.url}${path}`)).status, 404, path);
  } finally {
    await web.stop();
  }
});
