// The page's effects in doubt, open incidents and duration sparklines, through their route modules
// on a real database, Temporal, SMTP server and chat server: an unknown effect left by a lost SMTP
// reply is resent (or skipped) from the page through the code the CLI and Slack use.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import type { LightMyRequestResponse } from 'fastify';
import { loadConfig } from '../../../config/env.js';
import { claimEffect, recordEffects } from '../../../db/effects.js';
import { recordRun } from '../../../db/ledger.js';
import { defineCatalog } from '../../../schedules/define.js';
import { chartsRoutes } from '../../../web/routes/charts.js';
import { effectsRoutes } from '../../../web/routes/effects.js';
import { type WebDeps, webDeps as buildDeps } from '../../../web/deps.js';
import {
  chatTexts,
  depsWithChannels,
  effectRow,
  loopbackChannels,
  summaryWithMail,
} from '../../helpers/effects.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { routeApp } from '../../helpers/routes.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  windowByHand,
  windowPolicy,
  withWorker,
} from '../../helpers/temporal.js';
import { checkAccessibility, launchBrowser, loggedInPage, screenshot } from '../../helpers/browser.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';

const stack = realStack();
const channels = loopbackChannels();

/** The sales summary plus one e-mail per window. */
const withMail = summaryWithMail();
const job = 'page-mail';
const catalog = defineCatalog([
  salesJob(job, {
    start: '2026-08-01T00:00:00Z',
    timezone: 'Europe/Berlin',
    handler: withMail,
    alerts: { telegram: ['ops-chat'] },
  }),
]);

/** What the page's process is configured with: the loopback channels, alice approves, bob is known. */
const pageEnv = () => ({
  DATABASE_URL: stack.t.url,
  TEMPORAL_ADDRESS: stack.env.address,
  TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
  SMTP_HOST: '127.0.0.1',
  SMTP_PORT: String(channels.smtp.port),
  TELEGRAM_BOT_TOKEN: '123:test',
  TELEGRAM_API_URL: channels.chat.telegramUrl,
  TIDEMARK_APPROVERS: 'alice',
  TIDEMARK_PEOPLE: 'bob=UBOB01',
});
const webDeps = (): WebDeps =>
  buildDeps({
    db: stack.t.db,
    client: stack.env.client,
    catalog,
    config: loadConfig({ ...process.env, ...pageEnv() }),
    now: () => new Date(),
  });

/** Runs the window at `start` (one hour) with the SMTP server storing the mail and dropping the reply. */
async function unknownEffect(start: string): Promise<string> {
  const end = new Date(new Date(start).getTime() + 3_600_000).toISOString().replace('.000Z', 'Z');
  await insertOrders(stack.t.db, ordersBetween(`${job}-${start}`, start, end, 5));
  const taskQueue = uniqueQueue(job);
  const deps = depsWithChannels(stack.t.db, catalog, channels.smtp, channels.chat);
  await withWorker(stack.env, taskQueue, deps, async () => {
    channels.smtp.plan.push('store-then-drop');
    await assert.rejects(
      windowByHand(stack.env.client, taskQueue, job, start, end, {
        ...windowPolicy(1, 20_000),
        effectTimeoutMs: 10_000,
      }),
      (err) => err instanceof WorkflowFailedError,
    );
  });
  const key = `${job}/${start}:report`;
  assert.equal((await effectRow(stack.t.db, key)).status, 'unknown');
  return key;
}

test('effects in doubt: listed with their window and reply, resent from the page through the decision code, refusals named', async () => {
  const key = await unknownEffect('2026-08-01T00:00:00Z');
  const app = await routeApp(effectsRoutes, webDeps());
  const listed = await app.inject({ method: 'GET', url: '/api/effects' });
  assert.equal(listed.statusCode, 200);
  const [effect, ...others] = listed.json() as Record<string, unknown>[];
  assert.equal(others.length, 0);
  assert.deepEqual(
    {
      key: effect!.key,
      job: effect!.job,
      window: effect!.window,
      windowStart: effect!.windowStart,
      windowEnd: effect!.windowEnd,
      channel: effect!.channel,
      name: effect!.name,
      status: effect!.status,
      policy: effect!.policy,
      attempts: effect!.attempts,
      actions: effect!.actions,
    },
    {
      key,
      job,
      window: `${job}/2026-08-01T00:00:00Z`,
      windowStart: '2026-08-01T00:00:00Z',
      windowEnd: '2026-08-01T01:00:00Z',
      channel: 'email',
      name: 'report',
      status: 'unknown',
      policy: 'ask',
      attempts: 1,
      actions: ['resend', 'skip'],
    },
  );
  assert.ok(String(effect!.lastError).length > 0, 'the last error is shown');
  assert.equal((effect!.lastAttempt as { outcome: string }).outcome, 'unknown');

  const incidents = (await app.inject({ method: 'GET', url: '/api/incidents' })).json() as {
    subject: string;
    kind: string;
    occurrences: number;
  }[];
  assert.deepEqual(
    incidents.map((i) => [i.subject, i.kind, i.occurrences]),
    [[key, 'effect-unknown', 1]],
  );

  const decide = (decision: string, body: unknown, k = key) =>
    app.inject({
      method: 'POST',
      url: `/api/effects/${encodeURIComponent(k)}/${decision}`,
      payload: body as object,
    });
  const sent = channels.smtp.messages.length;
  // Refused before anything is decided, each naming the field and the fix.
  for (const [body, status, error] of [
    [{}, 400, /^by: name who decides/],
    [{ by: 'mallory' }, 400, /^by: "mallory" is not a known person \(alice, bob\)/],
    [{ by: 'bob' }, 403, /^by: bob may not decide effects \(approvers: alice\)/],
  ] as const) {
    const r = await decide('resend', body);
    assert.equal(r.statusCode, status, r.body);
    assert.match((r.json() as { error: string }).error, error);
  }
  assert.equal((await decide('frobnicate', { by: 'alice' })).statusCode, 404);
  assert.equal((await decide('resend', { by: 'alice' }, `${job}/nothing:report`)).statusCode, 404);
  assert.equal(channels.smtp.messages.length, sent, 'nothing sent by a refused decision');
  assert.equal((await effectRow(stack.t.db, key)).status, 'unknown');

  const alertsBefore = chatTexts(channels.chat, 'telegram').length;
  const resent = await decide('resend', { by: 'alice' });
  assert.equal(resent.statusCode, 200, resent.body);
  assert.equal((resent.json() as { outcome: string }).outcome, 'done');
  // Really resent: the SMTP server got the same message (same Message-ID) once more.
  assert.equal(channels.smtp.messages.length, sent + 1);
  assert.equal(channels.smtp.messages.at(-1)!.subject, `report ${job}/2026-08-01T00:00:00Z`);
  assert.equal(channels.smtp.messages.at(-1)!.messageId, channels.smtp.messages.at(-2)!.messageId);
  const row = await effectRow(stack.t.db, key);
  assert.deepEqual([row.status, row.decided_by, row.attempts], ['done', 'alice', 2]);
  assert.match(chatTexts(channels.chat, 'telegram').slice(alertsBefore).join('\n'), /recovered/);
  assert.deepEqual((await app.inject({ method: 'GET', url: '/api/effects' })).json(), []);
  assert.deepEqual((await app.inject({ method: 'GET', url: '/api/incidents' })).json(), []);

  // Decided once: a second Resend is refused with the decision code's own reason.
  const again = await decide('resend', { by: 'alice' });
  assert.equal(again.statusCode, 409);
  assert.match((again.json() as { error: string }).error, /is done, not unknown/);
  const audit = await stack.t.db
    .selectFrom('approval_audit')
    .select(['actor', 'decision', 'accepted', 'source'])
    .where('request', '=', key)
    .orderBy('id')
    .execute();
  assert.deepEqual(
    audit.map((a) => [a.actor, a.decision, a.accepted, a.source]),
    [
      ['mallory', 'resend', false, 'page'],
      ['bob', 'resend', false, 'page'],
      ['alice', 'resend', true, 'page'],
      ['alice', 'resend', false, 'page'],
    ],
  );
  await app.close();
});

test('an unknown effect skipped from the page: not sent, recorded as skipped by its decider', async () => {
  const key = await unknownEffect('2026-08-01T02:00:00Z');
  const app = await routeApp(effectsRoutes, webDeps());
  const sent = channels.smtp.messages.length;
  const r = await app.inject({
    method: 'POST',
    url: `/api/effects/${encodeURIComponent(key)}/skip`,
    payload: { by: 'alice' },
  });
  assert.equal(r.statusCode, 200, r.body);
  assert.equal((r.json() as { outcome: string }).outcome, 'skipped');
  assert.equal(channels.smtp.messages.length, sent);
  const row = await effectRow(stack.t.db, key);
  assert.deepEqual([row.status, row.decision, row.decided_by], ['skipped', 'skip', 'alice']);
  await app.close();
});

test('an effect begun whose lease passed (its attempt died) is in doubt, and is skipped from the page as unknown', async () => {
  const key = `${job}/2026-08-01T03:00:00Z:report`;
  await recordEffects(stack.t.db, [
    {
      key,
      job,
      windowKey: `${job}/2026-08-01T03:00:00Z`,
      name: 'report',
      channel: 'email',
      policy: 'ask',
      request: { to: ['ops@example.test'], subject: 'x', text: 'x' },
      providerKey: key,
    },
  ]);
  // Claimed with a lease that ended a second ago on the database's clock: the attempt that took it is gone.
  assert.ok(await claimEffect(stack.t.db, key, 0, -1_000, new Date()));
  const app = await routeApp(effectsRoutes, webDeps());
  const listed = (await app.inject({ method: 'GET', url: '/api/effects' })).json() as Record<
    string,
    unknown
  >[];
  const effect = listed.find((e) => e.key === key)!;
  assert.deepEqual(
    [effect.status, effect.leasePassed, effect.actions, effect.windowStart],
    ['begun', true, ['resend', 'skip'], null],
  );
  const sent = channels.smtp.messages.length;
  const r = await app.inject({
    method: 'POST',
    url: `/api/effects/${encodeURIComponent(key)}/skip`,
    payload: { by: 'alice' },
  });
  assert.equal(r.statusCode, 200, r.body);
  assert.equal(channels.smtp.messages.length, sent);
  const row = await effectRow(stack.t.db, key);
  assert.deepEqual([row.status, row.decided_by], ['skipped', 'alice']);
  assert.match(String(row.last_error), /never marked done: outcome unknown/);
  await app.close();
});

test("a job's durations sparkline: SVG with a title, one red mark per failed run, never cached", async () => {
  const spark = 'spark-job';
  const deps = { ...webDeps(), catalog: defineCatalog([salesJob(spark), salesJob('idle-job')]) };
  const at = (i: number) => new Date(Date.UTC(2026, 7, 1, i));
  // 50 runs, the last 48 shown: every tenth failed, and runs that found the window done left out.
  for (let i = 0; i < 50; i++)
    await recordRun(stack.t.db, {
      kind: 'window',
      job: spark,
      windowStart: at(i),
      generation: 0,
      startedAt: at(i + 1),
      finishedAt: new Date(at(i + 1).getTime() + 100 + i * 10),
      outcome: i % 10 === 9 ? 'failed' : 'processed',
    });
  await recordRun(stack.t.db, {
    kind: 'window',
    job: spark,
    windowStart: at(0),
    startedAt: at(60),
    finishedAt: at(60),
    outcome: 'skipped',
  });
  const app = await routeApp(chartsRoutes, deps);
  const r = await app.inject({ method: 'GET', url: `/api/jobs/${spark}/durations.svg` });
  assert.equal(r.statusCode, 200);
  assert.match(String(r.headers['content-type']), /^image\/svg\+xml/);
  assert.equal(r.headers['cache-control'], 'no-store');
  assert.match(r.body, /^<svg[^>]* role="img"><title>/);
  assert.match(
    r.body,
    /<title>spark-job: durations of the last 48 window runs, 120 ms to 590 ms, latest 590 ms; 5 failed<\/title>/,
  );
  // Runs 2..49 are shown: failed ones are 9, 19, 29, 39, 49, at data indexes 7, 17, 27, 37, 47.
  const marks = [...r.body.matchAll(/<path[^>]*fill="#dc2626"[^>]*ecmeta_data_index="(\d+)"/g)].map((m) =>
    Number(m[1]),
  );
  assert.deepEqual(marks, [7, 17, 27, 37, 47]);

  const idle = await app.inject({ method: 'GET', url: '/api/jobs/idle-job/durations.svg' });
  assert.match(idle.body, /<title>idle-job: no window runs yet<\/title>/);
  assert.match(idle.body, />no runs yet<\/text>/, 'said in the picture too');
  const unknown = await app.inject({ method: 'GET', url: '/api/jobs/nope/durations.svg' });
  assert.equal(unknown.statusCode, 404);
  assert.match((unknown.json() as { error: string }).error, /unknown job "nope"/);
  await app.close();
});

test('through the real server: the routes need a session, and a decision its CSRF token', async () => {
  const token = 'page-effects-token-1234';
  const web = await startWeb(stack, { token, catalog, env: pageEnv() });
  try {
    assert.equal((await fetch(`${web.url}/api/effects`)).status, 401);
    assert.equal((await fetch(`${web.url}/api/jobs/${job}/durations.svg`)).status, 401);
    const login = await postLogin(web.url, token);
    const cookie = sessionCookie(login);
    const html = await (await fetch(web.url, { headers: { cookie } })).text();
    const csrf = /<meta name="csrf" content="([a-f0-9]+)"/.exec(html)![1]!;
    const list = await fetch(`${web.url}/api/effects`, { headers: { cookie } });
    assert.equal(list.status, 200);
    assert.ok(Array.isArray(await list.json()));
    const svg = await fetch(`${web.url}/api/jobs/${job}/durations.svg`, { headers: { cookie } });
    assert.match(String(svg.headers.get('content-type')), /^image\/svg\+xml/);
    const url = `${web.url}/api/effects/${encodeURIComponent(`${job}/none:report`)}/skip`;
    const body = JSON.stringify({ by: 'alice' });
    const headers = { cookie, 'content-type': 'application/json' };
    assert.equal((await fetch(url, { method: 'POST', headers, body })).status, 403, 'no CSRF token');
    const r = await fetch(url, { method: 'POST', headers: { ...headers, 'x-csrf-token': csrf }, body });
    assert.equal(r.status, 404);
    assert.match(((await r.json()) as { error: string }).error, /there is no effect/);
  } finally {
    await web.stop();
  }
});

test('in the browser: Resend of an unknown effect really resends it; both views pass axe and are captured', async () => {
  const [first, second] = [
    await unknownEffect('2026-08-01T04:00:00Z'),
    await unknownEffect('2026-08-01T05:00:00Z'),
  ];
  const token = 'page-effects-browser-1234';
  const web = await startWeb(stack, { token, catalog, env: pageEnv() });
  const browser = await launchBrowser();
  try {
    const { page, problems } = await loggedInPage(browser, web.url, token, { hash: '#/effects' });
    const card = (key: string) => page.locator('article.effect', { hasText: key });
    await card(first).waitFor();
    await card(second).waitFor();
    // The window in the job's zone and UTC, its attempt, and the reply the SMTP server never gave.
    const text = await card(first).innerText();
    assert.match(text, /Window\s+2026-08-01 06:00 GMT\+2 \/ 2026-08-01 04:00 UTC/);
    assert.match(text, /Attempts\s+1/);
    assert.match(text, /Provider reply\s+none \(no answer recorded\)/);
    await checkAccessibility(page, 'effects');
    await screenshot(page, 'effects');

    const sent = channels.smtp.messages.length;
    await page.fill('#decider', 'alice');
    await card(first).getByRole('button', { name: 'Resend' }).click();
    await page.locator('.view-status', { hasText: `${first}: done` }).waitFor();
    // Resent for real: the SMTP server has the same message once more, and the ledger says who.
    assert.equal(channels.smtp.messages.length, sent + 1);
    assert.equal(channels.smtp.messages.at(-1)!.subject, `report ${job}/2026-08-01T04:00:00Z`);
    const row = await effectRow(stack.t.db, first);
    assert.deepEqual([row.status, row.decided_by], ['done', 'alice']);
    await card(first).waitFor({ state: 'detached' });
    assert.equal(await card(second).count(), 1, 'the other effect still waits for a decision');

    await page.goto(`${web.url}/#/incidents`);
    await page.locator('article.incident', { hasText: second }).waitFor();
    assert.equal(
      await page.locator('article.incident', { hasText: first }).count(),
      0,
      'its incident closed',
    );
    await checkAccessibility(page, 'incidents');
    await screenshot(page, 'incidents');

    // Narrow and dark: one column, still no serious violation.
    const narrow = await loggedInPage(browser, web.url, token, {
      hash: '#/effects',
      width: 390,
      colorScheme: 'dark',
    });
    await narrow.page.locator('article.effect', { hasText: second }).waitFor();
    await checkAccessibility(narrow.page, 'effects at 390 px, dark');
    await screenshot(narrow.page, 'effects-390-dark');
    assert.deepEqual(
      [...problems.refused, ...problems.errors, ...narrow.problems.refused, ...narrow.problems.errors],
      [],
    );
  } finally {
    await browser.close();
    await web.stop();
  }
});

test('effects in doubt and open incidents come in pages: a limit, and a Link to the next page until the last', async () => {
  const many = 'page-many';
  await stack.t.db
    .insertInto('effects')
    .values(
      Array.from({ length: 250 }, (_, i) => ({
        effect_key: `${many}/e-${String(i).padStart(3, '0')}`,
        job: many,
        window_key: null,
        name: `e-${i}`,
        channel: 'http',
        policy: 'ask' as const,
        status: 'failed' as const,
        request: '{}',
        provider_key: `${many}/e-${i}`,
        created_at: new Date(Date.UTC(2026, 7, 1, 0, 0, Math.floor(i / 2))),
      })),
    )
    .execute();
  await stack.t.db
    .insertInto('incidents')
    .values(
      Array.from({ length: 130 }, (_, i) => ({
        job: many,
        subject: `${many}/s-${i}`,
        kind: 'window-failed',
        last_error: 'x',
        opened_at: new Date(Date.UTC(2026, 7, 1, 0, 0, Math.floor(i / 3))),
      })),
    )
    .execute();
  // A catalog of its own: the file's other tests leave effects of theirs in doubt.
  const app = await routeApp(effectsRoutes, {
    ...webDeps(),
    catalog: defineCatalog([salesJob(many, { start: '2026-08-01T00:00:00Z' })]),
  });
  try {
    /** Every page from `url` on, following rel="next". */
    const pages = async (url: string) => {
      const seen: { key?: string; id?: string }[][] = [];
      for (let next: string | undefined = url; next;) {
        const r: LightMyRequestResponse = await app.inject({ method: 'GET', url: next });
        assert.equal(r.statusCode, 200, r.body);
        seen.push(r.json());
        next = /<([^>]+)>;\s*rel="next"/.exec(String(r.headers.link ?? ''))?.[1];
      }
      return seen;
    };
    const effects = await pages(`/api/effects?job=${many}`);
    assert.deepEqual(
      effects.map((p) => p.length),
      [100, 100, 50],
    );
    const keys = effects.flat().map((e) => e.key!);
    assert.equal(new Set(keys).size, 250, 'each once');
    assert.deepEqual(keys, [...keys].sort(), 'in order');
    assert.deepEqual(
      (await pages(`/api/effects?limit=120&job=${many}`)).map((p) => p.length),
      [120, 120, 10],
    );
    const incidents = await pages(`/api/incidents?limit=50&job=${many}`);
    assert.deepEqual(
      incidents.map((p) => p.length),
      [50, 50, 30],
    );
    assert.equal(new Set(incidents.flat().map((i) => i.id)).size, 130);
    for (const [url, field] of [
      ['/api/effects?limit=0', /limit: a whole number from 1 to 1000/],
      ['/api/effects?limit=5000', /limit: a whole number from 1 to 1000/],
      ['/api/incidents?limit=x', /limit: a whole number from 1 to 1000/],
      ['/api/effects?after=no-such-effect', /after: no effect "no-such-effect"/],
      ['/api/incidents?after=nope', /after: no incident "nope"/],
    ] as const) {
      const r = await app.inject({ method: 'GET', url });
      assert.equal(r.statusCode, 400, url);
      assert.match(r.json<{ error: string }>().error, field);
    }

    // On the page: the first 100, and Show more until every one is shown and the button is gone.
    const all = ((await app.inject({ method: 'GET', url: '/api/effects?limit=1000' })).json() as unknown[])
      .length;
    const token = 'page-effects-paging-5678';
    const web = await startWeb(stack, {
      token,
      catalog: defineCatalog([salesJob(many, { start: '2026-08-01T00:00:00Z' })]),
      env: pageEnv(),
    });
    const browser = await launchBrowser();
    try {
      const { page } = await loggedInPage(browser, web.url, token, { hash: '#/effects' });
      const cards = page.locator('article.effect');
      const shows = (n: number) =>
        eventually(async () => ((await cards.count()) === n ? true : undefined), 20_000, `${n} cards`);
      await shows(100);
      for (let shown = 100; shown < all; shown = Math.min(shown + 100, all)) {
        await page.getByRole('button', { name: 'Show more' }).click();
        const want = Math.min(shown + 100, all);
        await shows(want);
      }
      assert.equal(await cards.count(), all);
      assert.equal(
        await page.getByRole('button', { name: 'Show more' }).count(),
        0,
        'no button after the last page',
      );
    } finally {
      await browser.close();
      await web.stop();
    }
  } finally {
    await stack.t.db.deleteFrom('effects').where('job', '=', many).execute();
    await stack.t.db.deleteFrom('incidents').where('job', '=', many).execute();
  }
});
