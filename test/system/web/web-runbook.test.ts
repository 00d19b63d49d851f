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
