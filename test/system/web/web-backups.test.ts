// The page's backups: GET /api/jobs/:job/backups lists a backup job's backups (from two real
// databaseBackup windows run by a real worker into a temp directory) with the exact restore command
// and the last drill; POST .../verify verifies one (ok for a good file, ok:false naming sha256 for
// a corrupted one) behind the page's session and CSRF rules; in headless Chromium the Backups view
// shows the table, verifies inline and passes axe-core. No answer carries a connection password.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { constants } from 'node:fs';
import { type FileHandle, mkdtemp, open, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { sql } from 'kysely';
import type { Browser } from 'playwright-core';
import { memoryLogger } from '../../../activities/logger.js';
import { localDestination } from '../../../jobs/backup/destination.js';
import { databaseBackup } from '../../../jobs/backup/index.js';
import type { BackupRecord } from '../../../jobs/backup/listing.js';
import type { VerifyReport } from '../../../jobs/backup/verify.js';
import { type Catalog } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import { checkAccessibility, launchBrowser, loggedInPage, screenshot } from '../../helpers/browser.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  windowByHand,
  windowPolicy,
  withWorker,
} from '../../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';
import { restoreCommand } from '../../../web/routes/backups.js';
import { redactor } from '../../../workers/channels.js';

// The file's set-up runs inside the stack's own hook, so it sees the stack ready.
const stack = realStack(async () => await setUp());
const TOKEN = 'web-backups-token-7c41';
const JOB = 'web-bk';
const ENC = 'web-bk-enc';
const KEYS_VAR = 'TIDEMARK_TEST_WEB_BK_KEYS';
const K2 = randomBytes(32).toString('base64');
const DAYS = ['2026-10-01T00:00:00Z', '2026-10-02T00:00:00Z', '2026-10-03T00:00:00Z'];

type Listed = {
  job: string;
  backups: (BackupRecord & { restoreCommand: string })[];
  lastDrill: { at: string; ok: boolean; detail: string; windowKey: string } | null;
};

let source: TestDb;
let dir: string;
let catalog: Catalog;
let web: Awaited<ReturnType<typeof startWeb>>;

/**
 * A password in the job's connection string (the test server trusts local connections, so it is
 * never checked): no answer of the page may carry it.
 */
const PASSWORD = 'web-bk-secret-pw-0f3e';
const withPassword = (url: string) => {
  const u = new URL(url);
  u.password = PASSWORD;
  return u.toString();
};

async function setUp() {
  source = await createTestDb({ migrated: false });
  await sql`create table public.items (id serial primary key, label text not null)`.execute(source.db);
  await sql`insert into public.items (label) select 'item ' || n from generate_series(1, 300) n`.execute(
    source.db,
  );
  dir = await mkdtemp(join(tmpdir(), 'tidemark-web-backups-'));
  catalog = defineCatalog([
    databaseBackup({
      name: JOB,
      grid: 'day',
      start: DAYS[0]!,
      database: withPassword(source.url),
      destination: localDestination(dir),
      retention: { daily: 7, weekly: 0, monthly: 0 },
      tables: ['public.items'],
    }),
    // Encrypted with the first key of an environment variable's list (read at use time).
    databaseBackup({
      name: ENC,
      grid: 'day',
      start: DAYS[0]!,
      database: withPassword(source.url),
      destination: localDestination(dir),
      encryption: { env: KEYS_VAR },
      retention: { daily: 7, weekly: 0, monthly: 0 },
      tables: ['public.items'],
    }),
    salesJob('web-bk-sales', { start: DAYS[0]! }),
  ]);
  process.env[KEYS_VAR] = `k2:${K2},k1:${randomBytes(32).toString('base64')}`;
  // Two windows run for real by a worker: the backups the page lists.
  const taskQueue = uniqueQueue(JOB);
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      for (const [job, i] of [
        [JOB, 0],
        [JOB, 1],
        [ENC, 0],
      ] as const) {
        const r = await windowByHand(
          stack.env.client,
          taskQueue,
          job,
          DAYS[i]!,
          DAYS[i + 1]!,
          windowPolicy(1, 120_000),
        );
        assert.equal(r.outcome, 'processed');
      }
    },
  );
  web = await startWeb(stack, { token: TOKEN, catalog, env: {} });
}
after(async () => {
  delete process.env[KEYS_VAR];
  await web?.stop();
  await source?.drop();
});

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${web.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...init.headers },
  });
const list = async () => {
  const r = await api(`/api/jobs/${JOB}/backups`);
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.ok(!text.includes(PASSWORD), 'no connection password in the listing');
  return JSON.parse(text) as Listed;
};
/** Runs `fn` with one byte in the middle of a backup's file flipped (same size, another digest), then puts it back. */
async function withCorrupted(objectKey: string, fn: () => Promise<void>) {
  const path = join(dir, objectKey);
  const good = await readFile(path);
  const bad = Buffer.from(good);
  bad[bad.length >> 1] = bad[bad.length >> 1]! ^ 0xff;
  await writeFile(path, bad);
  try {
    await fn();
  } finally {
    await writeFile(path, good);
  }
}

const verifyPath = (windowKey: string) => `/api/jobs/${JOB}/backups/${encodeURIComponent(windowKey)}/verify`;

test('GET /api/jobs/:job/backups: each backup with its fields and the exact restore command; 404 for other jobs', async () => {
  const listed = await list();
  assert.equal(listed.job, JOB);
  assert.equal(listed.lastDrill, null, 'no drill has run');
  assert.deepEqual(
    listed.backups.map((b) => b.windowKey),
    [`${JOB}/${DAYS[1]}`, `${JOB}/${DAYS[0]}`],
    'newest first',
  );
  const db = new URL(source.url).pathname.slice(1);
  for (const b of listed.backups) {
    const file = await readFile(join(dir, b.objectKey));
    assert.equal(b.bytes, file.length);
    assert.match(b.sha256, /^[0-9a-f]{64}$/);
    assert.deepEqual([b.location, b.destination], [join(dir, b.objectKey), `directory ${dir}`]);
    assert.deepEqual([b.encrypted, b.keyId, b.tableCounts], [false, null, { 'public.items': 300 }]);
    assert.ok(!Number.isNaN(Date.parse(b.dumpedAt)));
    assert.equal(
      b.restoreCommand,
      `npx tidemark backups restore ${JOB} --key ${b.windowKey} --into postgres://…/${db}_restored`,
    );
  }

  const sales = await api('/api/jobs/web-bk-sales/backups');
  assert.equal(sales.status, 404);
  assert.match(((await sales.json()) as { error: string }).error, /web-bk-sales is not a backup job/);
  const unknown = await api('/api/jobs/nope/backups');
  assert.equal(unknown.status, 404);
  assert.match(((await unknown.json()) as { error: string }).error, /nope/);
  const jobs = (await (await api('/api/backups')).json()) as { jobs: string[] };
  assert.deepEqual(jobs.jobs, [JOB, ENC], 'the backup jobs of the catalog, for the Backups view');
});

test('POST .../verify: ok for a good backup; ok:false naming sha256 for a corrupted file, recorded for the page', async () => {
  const [newest, oldest] = (await list()).backups;
  const good = await api(verifyPath(newest!.windowKey), { method: 'POST', body: '{}' });
  assert.equal(good.status, 200);
  const report = (await good.json()) as VerifyReport;
  assert.equal(report.ok, true, JSON.stringify(report.checks));
  assert.equal(report.backup.windowKey, newest!.windowKey);
  assert.ok(report.checks.some((c) => c.name === 'sha256' && c.ok));

  await withCorrupted(oldest!.objectKey, async () => {
    const bad = await api(verifyPath(oldest!.windowKey), { method: 'POST', body: '{}' });
    const badText = await bad.text();
    assert.equal(bad.status, 200, badText);
    assert.ok(!badText.includes(PASSWORD));
    const failed = JSON.parse(badText) as VerifyReport;
    assert.equal(failed.ok, false);
    assert.deepEqual(
      failed.checks.filter((c) => !c.ok).map((c) => c.name),
      ['sha256'],
    );
  });

  // The results are the listing's last verifications, triggered from the page.
  const after = new Map((await list()).backups.map((b) => [b.windowKey, b.lastVerification]));
  assert.deepEqual([after.get(newest!.windowKey)?.ok, after.get(newest!.windowKey)?.trigger], [true, 'page']);
  assert.deepEqual(
    [after.get(oldest!.windowKey)?.ok, after.get(oldest!.windowKey)?.trigger],
    [false, 'page'],
  );
  assert.match(after.get(oldest!.windowKey)!.detail, /sha256/);

  const missing = await api(verifyPath(`${JOB}/2026-01-01T00:00:00Z`), { method: 'POST', body: '{}' });
  assert.equal(missing.status, 404);
  assert.match(((await missing.json()) as { error: string }).error, /web-bk\/2026-01-01T00:00:00Z/);
});

test('an encrypted backup: listed with its key id, verified with the key its header names; no key material in any answer', async () => {
  const get = async () => {
    const r = await api(`/api/jobs/${ENC}/backups`);
    const text = await r.text();
    assert.ok(!text.includes(K2) && !text.includes(PASSWORD), 'no key or password in the listing');
    return (JSON.parse(text) as Listed).backups;
  };
  const [b] = await get();
  assert.deepEqual([b!.encrypted, b!.keyId, b!.objectKey.endsWith('.enc')], [true, 'k2', true]);
  const verify = async () => {
    const r = await api(`/api/jobs/${ENC}/backups/${encodeURIComponent(b!.windowKey)}/verify`, {
      method: 'POST',
      body: '{}',
    });
    const text = await r.text();
    assert.equal(r.status, 200, text);
    assert.ok(!text.includes(K2) && !text.includes(PASSWORD), 'no key or password in the report');
    return JSON.parse(text) as VerifyReport;
  };
  const ok = await verify();
  assert.equal(ok.ok, true, JSON.stringify(ok.checks));
  assert.ok(ok.checks.some((c) => c.name === 'gcm-tag' && c.ok && /k2/.test(c.detail)));

  // Key k2 dropped from the list: the backup cannot be read, said without any key's bytes.
  const saved = process.env[KEYS_VAR]!;
  const k3 = randomBytes(32).toString('base64');
  process.env[KEYS_VAR] = `k3:${k3}`;
  try {
    const failed = await verify();
    assert.equal(failed.ok, false);
    const said = JSON.stringify(failed.checks);
    assert.match(said, /k2/, 'names the key id it needs');
    assert.ok(!said.includes(k3));
  } finally {
    process.env[KEYS_VAR] = saved;
  }
  const [after] = await get();
  assert.deepEqual([after!.lastVerification?.ok, after!.lastVerification?.trigger], [false, 'page']);
});

test('POST .../verify is refused without the page credentials: no session, no CSRF token, another origin', async () => {
  const { backups } = await list();
  const url = `${web.url}${verifyPath(backups[0]!.windowKey)}`;
  const before = backups[0]!.lastVerification;
  assert.equal((await fetch(url, { method: 'POST', body: '{}' })).status, 401, 'no session');
  const cookie = sessionCookie(await postLogin(web.url, TOKEN));
  const html = await (await fetch(web.url, { headers: { cookie } })).text();
  const csrf = /<meta name="csrf" content="([a-f0-9]+)"/.exec(html)![1]!;
  const headers = { cookie, 'content-type': 'application/json' };
  assert.equal((await fetch(url, { method: 'POST', headers, body: '{}' })).status, 403, 'no CSRF token');
  assert.equal(
    (
      await fetch(url, {
        method: 'POST',
        headers: { ...headers, 'x-csrf-token': 'f'.repeat(64) },
        body: '{}',
      })
    ).status,
    403,
    'a wrong CSRF token',
  );
  assert.equal(
    (
      await fetch(url, {
        method: 'POST',
        headers: { ...headers, 'x-csrf-token': csrf, origin: 'https://evil.example' },
        body: '{}',
      })
    ).status,
    403,
    'another origin',
  );
  assert.deepEqual((await list()).backups[0]!.lastVerification, before, 'nothing verified by a refused POST');
  const ok = await fetch(url, { method: 'POST', headers: { ...headers, 'x-csrf-token': csrf }, body: '{}' });
  assert.equal(ok.status, 200);
  assert.equal(((await ok.json()) as VerifyReport).ok, true);
});

test('in the browser: the Backups view shows the table, Verify answers inline, the restore command copies; axe passes', async () => {
  const browser: Browser = await launchBrowser();
  try {
    // Reached as a person does, once the overview is up (a hash given before the first update
    // arrives would render the view twice, the first table replaced under the test's feet).
    const { page, problems } = await loggedInPage(browser, web.url, TOKEN);
    await page.locator(`table.job-list tr[data-job="${JOB}"]`).waitFor();
    await page.click('#nav a[data-view="backups"]');
    const table = page.locator(`table.bk-table[data-job="${JOB}"]`);
    await table.waitFor();
    const rows = table.locator('tbody');
    assert.equal(await rows.count(), 2);
    const { backups } = await list();
    const first = rows.first();
    const text = await first.innerText();
    assert.match(text, /2026-10-02 00:00 UTC/, text);
    assert.match(text, new RegExp(backups[0]!.sha256.slice(0, 12)));
    assert.ok(!text.includes(backups[0]!.sha256), 'the digest is shortened in the cell');
    assert.equal(await first.locator('.bk-sha').getAttribute('title'), backups[0]!.sha256);
    assert.match(text, /public\.items\s*300/);
    assert.match(text, /\d+(\.\d)? (KiB|B|MiB)/, 'the size for people');
    assert.match(text, /not encrypted/);
    assert.match(
      await page.locator(`table.bk-table[data-job="${ENC}"] tbody`).first().innerText(),
      /key k2/,
      'the encrypted backup with its key id',
    );
    assert.equal(
      (await first.locator('code.bk-cmd').innerText()).trim(),
      backups[0]!.restoreCommand,
      'the exact restore command',
    );
    assert.match(await page.locator('.bk-note').first().innerText(), /replace postgres:\/\/…/);

    await first.getByRole('button', { name: /^Verify/ }).click();
    await first.locator('.bk-result', { hasText: /verified: ok/ }).waitFor();
    // A corrupted file: FAILED inline, naming the check, and its last verification says so.
    const second = rows.nth(1);
    await withCorrupted(backups[1]!.objectKey, async () => {
      await second.getByRole('button', { name: /^Verify/ }).click();
      await second.locator('.bk-result', { hasText: /verified: FAILED/ }).waitFor();
      assert.match(await second.locator('.bk-result').innerText(), /^sha256: /m);
      assert.match(await second.locator('td.bk-last').innerText(), /^failed .*\(page\)/);
    });
    // Shown again from the listing: the verifications the server recorded.
    await page.click('#nav a[data-view="overview"]');
    await page.locator(`table.job-list tr[data-job="${JOB}"]`).waitFor();
    await page.click('#nav a[data-view="backups"]');
    await table.waitFor();
    assert.match(await first.locator('td.bk-last').innerText(), /^ok .*\(page\)/);
    assert.match(await second.locator('td.bk-last').innerText(), /^failed .*\(page\)\s+.*sha256/s);

    // Copy: into the page's clipboard (granted to this context), said in the status line.
    await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: web.url });
    await first.getByRole('button', { name: /^Copy the restore command/ }).click();
    await page.locator('#msg', { hasText: 'copied' }).waitFor();
    assert.equal(await page.evaluate('navigator.clipboard.readText()'), backups[0]!.restoreCommand);

    await checkAccessibility(page, 'the backups view');
    await screenshot(page, 'backups');

    const dark = await loggedInPage(browser, web.url, TOKEN, { width: 390, colorScheme: 'dark' });
    await dark.page.locator(`table.job-list tr[data-job="${JOB}"]`).waitFor();
    // One job's backups, from the job's own page (a job of another kind has no such link).
    await dark.page.evaluate(`location.hash = ${JSON.stringify('#/jobs/web-bk-sales')}`);
    await dark.page.locator('h1', { hasText: 'web-bk-sales: windows' }).waitFor();
    assert.equal(await dark.page.locator('a.wg-backups').count(), 0);
    await dark.page.evaluate(`location.hash = ${JSON.stringify(`#/jobs/${JOB}`)}`);
    await dark.page.locator('h1', { hasText: `${JOB}: windows` }).waitFor();
    await dark.page.click('a.wg-backups');
    await dark.page.locator('h1', { hasText: `${JOB}: backups` }).waitFor();
    assert.equal(await dark.page.locator('table.bk-table').count(), 1, 'only this job');
    await dark.page.locator(`table.bk-table[data-job="${JOB}"]`).waitFor();
    await checkAccessibility(dark.page, 'the backups view at 390 px, dark');
    await screenshot(dark.page, 'backups-390-dark');
    assert.ok(((await dark.page.evaluate('document.documentElement.scrollWidth')) as number) <= 390);
    assert.deepEqual(
      [...problems.refused, ...problems.errors, ...dark.problems.refused, ...dark.problems.errors],
      [],
    );
  } finally {
    await browser.close();
  }
});

test('the restore command quotes what a shell would split, and errors lose connection passwords (the redactor the page uses)', () => {
  assert.equal(
    restoreCommand("odd job's", 'odd/2026-10-01T00:00:00Z', 'postgres://u:pw@h:5432/sales%20db'),
    "npx tidemark backups restore 'odd job'\\''s' --key odd/2026-10-01T00:00:00Z --into postgres://…/sales%20db_restored",
  );
  assert.equal(
    redactor([])('connect to postgres://backup:s3cr%40t@db.internal:5432/sales failed; s3://bucket/k ok'),
    'connect to postgres://backup:***@db.internal:5432/sales failed; s3://bucket/k ok',
  );
});

test('verifications at once are bounded: past two, a third is refused (429) until one ends; the two finish', async () => {
  const { backups } = await list();
  assert.ok(backups.length >= 2);
  const [a, b] = backups;
  const encrypted = (await (await api(`/api/jobs/${ENC}/backups`)).json()) as Listed;
  // Each of the two files becomes a pipe with nothing written yet: its verification waits on it.
  const held = await Promise.all(
    [a!, b!].map(async (rec) => {
      const bytes = await readFile(rec.location);
      await rm(rec.location);
      execFileSync('mkfifo', [rec.location]);
      return { rec, bytes };
    }),
  );
  // A writer held on each pipe once its verification has opened it: opened without blocking, it
  // succeeds only when a reader is there, and held, the reader sees no end of file yet.
  const writers: FileHandle[] = [];
  try {
    const running = held.map(({ rec }) => api(verifyPath(rec.windowKey), { method: 'POST', body: '{}' }));
    // Both verifications read their pipes, so both hold their slot: only then is a third asked for
    // (asked earlier, it could take a slot itself and leave one of the two refused).
    for (const { rec } of held)
      writers.push(
        await eventually(
          () => open(rec.location, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined),
          60_000,
          `a verification reading ${rec.location}`,
        ),
      );
    const refused = await api(
      `/api/jobs/${ENC}/backups/${encodeURIComponent(encrypted.backups[0]!.windowKey)}/verify`,
      { method: 'POST', body: '{}' },
    );
    assert.equal(refused.status, 429);
    assert.match(((await refused.json()) as { error: string }).error, /2 verifications are running/);
    // The pipes get their bytes (a blocking writer opens at once: the reader is there), then the
    // held writers close: both verifications end, ok.
    await Promise.all(held.map(({ rec, bytes }) => writeFile(rec.location, bytes)));
    await Promise.all(writers.splice(0).map((f) => f.close()));
    for (const r of await Promise.all(running)) {
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as VerifyReport).ok, true);
    }
    const third = await api(
      `/api/jobs/${ENC}/backups/${encodeURIComponent(encrypted.backups[0]!.windowKey)}/verify`,
      {
        method: 'POST',
        body: '{}',
      },
    );
    assert.equal(third.status, 200, 'a slot is free again');
  } finally {
    await Promise.all(writers.map((f) => f.close()));
    for (const { rec, bytes } of held) {
      // A reader still waiting on its pipe gets the bytes (a pipe nobody reads refuses at once).
      await open(rec.location, constants.O_WRONLY | constants.O_NONBLOCK).then(
        async (f) => {
          await f.writeFile(bytes).catch(() => undefined);
          await f.close();
        },
        () => undefined,
      );
      await rm(rec.location, { force: true });
      await writeFile(rec.location, bytes);
    }
  }
});

test("a job's backups come in pages, newest first, with a Link to the older ones", async () => {
  const first = await api(`/api/jobs/${JOB}/backups?limit=1`);
  assert.equal(first.status, 200);
  const next = /<([^>]+)>;\s*rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
  assert.ok(next, 'a Link to the next page');
  const second = await api(next);
  assert.equal(second.headers.get('link'), null, 'the last page');
  const keys = [
    ...((await first.json()) as Listed).backups,
    ...((await second.json()) as Listed).backups,
  ].map((b) => b.windowKey);
  assert.deepEqual(keys, [`${JOB}/${DAYS[1]}`, `${JOB}/${DAYS[0]}`]);
  const bad = await api(
    `/api/jobs/${JOB}/backups?after=${encodeURIComponent(`${JOB}/1999-01-01T00:00:00Z`)}`,
  );
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { error: string }).error, /after: web-bk has no backup/);
});
