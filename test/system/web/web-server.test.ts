// The page's HTTP server (fastify), through the real server: answers the page's own handlers never see
// (a URL the router cannot decode), input Temporal or PostgreSQL refuses, a provider's secrets and
// markup, the update stream's snapshot shared by open pages, a job whose Schedule does not exist yet,
// login throttling; a body over the limit, and the update stream of a session that ends.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import { Client } from '@temporalio/client';
import { loadConfig } from '../../../config/env.js';
import { createDb, poolOf } from '../../../db/database.js';
import { defineCatalog } from '../../../schedules/define.js';
import { scheduleIdOf } from '../../../contract/schedule-ids.js';
import { startWebServer } from '../../../web/server.js';
import { salesJob } from '../../helpers/jobs.js';
import { eventually, realStack, uniqueQueue } from '../../helpers/temporal.js';
import { sql } from 'kysely';
import { schemaOf } from '../../../db/ledger-schema.js';
import { launchBrowser, loggedInPage } from '../../helpers/browser.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';

const stack = realStack();

/** A done window of `job` at 2026-06-01 01:00 whose effect 'notify' was left unknown after one attempt. */
async function doneWindowWithUnknownEffect(
  job: string,
  effect: { channel: string; request: unknown; error: string; result: unknown },
) {
  const start = '2026-06-01T01:00:00Z';
  const windowKey = `${job}/${start}`;
  const effectKey = `${windowKey}/notify`;
  const { db } = stack.t;
  await db
    .insertInto('job_windows')
    .values({
      job,
      window_start: new Date(start),
      window_end: new Date('2026-06-01T02:00:00Z'),
      window_key: windowKey,
      status: 'done',
      trigger: 'schedule',
      started_at: new Date('2026-06-01T02:05:00Z'),
      finished_at: new Date('2026-06-01T02:06:00Z'),
    })
    .execute();
  await db
    .insertInto('effects')
    .values({
      effect_key: effectKey,
      job,
      window_key: windowKey,
      name: 'notify',
      channel: effect.channel,
      policy: 'ask',
      status: 'unknown',
      attempts: 1,
      request: JSON.stringify(effect.request),
      provider_key: effectKey,
      last_error: effect.error,
      result: JSON.stringify(effect.result),
    })
    .execute();
  return { start, windowKey, effectKey };
}

/** A request sent as written: fetch would normalise or refuse a path like `/%`. */
function raw(url: string, method: string, path: string, headers: Record<string, string> = {}, body?: string) {
  const u = new URL(url);
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const r = request({ host: u.hostname, port: u.port, method, path, headers }, (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: b }));
      });
      r.on('error', reject);
      if (body !== undefined) r.write(body);
      r.end();
    },
  );
}

test('a URL the router cannot decode is a 400 in the page format, with the CSP, naming no internals', async () => {
  const catalog = defineCatalog([salesJob('bad-url', { start: '2026-06-01T00:00:00Z' })]);
  const token = 'bad-url-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    for (const [path, headers] of [
      ['/%', {}],
      ['/api/jobs/%E0%A4%A/grid', { cookie }],
    ] as const) {
      const r = await raw(web.url, 'GET', path, headers);
      assert.equal(r.status, 400, path);
      assert.ok(r.headers['content-security-policy'], `${path}: no CSP on the answer`);
      assert.equal(r.headers['x-frame-options'], 'DENY', path);
      assert.doesNotMatch(r.body, /FST_|statusCode/, `${path}: fastify's own error format: ${r.body}`);
      assert.match((JSON.parse(r.body) as { error: string }).error, /^path: .* is not a valid URL/, r.body);
    }
  } finally {
    await web.stop();
  }
});

test('a pause reason too long for Temporal is a 400 naming reason, not a 500; a long one within the limit pauses', async () => {
  const job = 'long-pause';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'long-pause-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  const handle = await stack.env.client.schedule.create({
    scheduleId: scheduleIdOf(job),
    spec: { intervals: [{ every: '1h' }] },
    action: { type: 'startWorkflow', workflowType: 'nothing', taskQueue: 'long-pause-none', args: [] },
  });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    const page = await (await fetch(`${web.url}/`, { headers: { cookie } })).text();
    const csrf = /([a-f0-9]{64})/.exec(page)![1]!;
    const pause = (reason: string) =>
      fetch(`${web.url}/api/jobs/${job}/pause`, {
        method: 'POST',
        headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
        body: JSON.stringify({ reason }),
      });
    const tooLong = await pause('r'.repeat(60_000));
    assert.equal(tooLong.status, 400, await tooLong.clone().text());
    assert.match(((await tooLong.json()) as { error: string }).error, /^reason: .*at most 1000 characters/);
    assert.equal((await handle.describe()).state.paused, false);
    const note = 'n'.repeat(1000);
    const ok = await pause(note);
    assert.equal(ok.status, 200, await ok.text());
    const state = (await handle.describe()).state;
    assert.equal(state.paused, true);
    assert.equal(state.note, note);
  } finally {
    await handle.delete();
    await web.stop();
  }
});

test("a webhook's secret path echoed by a provider's error or reply never reaches the page", async () => {
  const job = 'hook-echo';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'hook-echo-token-0123';
  const secret = 'T0ABC/B0DEF/s3cr3tPathToken';
  const hook = `https://hooks.example.test/services/${secret}`;
  // As a provider's 4xx answer quotes it (http-api.ts keeps 200 characters of the body).
  const error = `POST https://hooks.example.test: HTTP 404 {"error":"no hook at ${hook}?token=qs-s3cr3t"}`;
  const { windowKey, effectKey } = await doneWindowWithUnknownEffect(job, {
    channel: 'http',
    request: { method: 'POST', url: hook, body: { text: 'done' } },
    error,
    result: { echoed: hook },
  });
  const { db } = stack.t;
  await db
    .insertInto('effect_attempts')
    .values({
      effect_key: effectKey,
      fence: 1,
      started_at: new Date('2026-06-01T02:06:00Z'),
      finished_at: new Date('2026-06-01T02:06:01Z'),
      duration_ms: 1000,
      outcome: 'unknown',
      error,
    })
    .execute();
  await db
    .insertInto('incidents')
    .values({ job, subject: effectKey, kind: 'effect-unknown', last_error: error })
    .execute();
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    for (const path of [
      '/api/effects',
      '/api/incidents',
      `/api/jobs/${job}/windows/${encodeURIComponent(windowKey)}`,
    ]) {
      const r = await fetch(`${web.url}${path}`, { headers: { cookie } });
      const body = await r.text();
      assert.equal(r.status, 200, `${path}: ${body}`);
      assert.match(body, /hooks\.example\.test/, `${path} shows the provider's origin`);
      assert.doesNotMatch(body, /s3cr3t/, `${path} shows the webhook's secret: ${body}`);
    }
  } finally {
    await web.stop();
  }
});

/** A page server over `n` jobs whose database statements and Temporal calls are counted. */
async function countedWeb(n: number, prefix: string) {
  const catalog = defineCatalog(
    Array.from({ length: n }, (_, i) => salesJob(`${prefix}-${i}`, { start: '2026-06-01T00:00:00Z' })),
  );
  // A database handle of its own whose queries are counted: the overview's (each request's look at
  // its session is its own, and not what is shared).
  const db = createDb(stack.t.url);
  const counts = { queries: 0, temporal: 0 };
  const sessionLookup = (q: unknown) =>
    /"web_sessions"/.test(typeof q === 'string' ? q : ((q as { text?: string } | null)?.text ?? ''));
  poolOf(db).on('connect', (c) => {
    const query = c.query.bind(c) as (...a: unknown[]) => unknown;
    (c as unknown as { query: unknown }).query = (...a: unknown[]) => (
      sessionLookup(a[0]) || counts.queries++,
      query(...a)
    );
  });
  // A client whose every call to the Temporal service is counted.
  const service = stack.env.client.workflowService;
  const counted = new Proxy(service, {
    get(target, key) {
      const value = Reflect.get(target, key, target) as unknown;
      if (typeof value !== 'function') return value;
      return (...a: unknown[]) => (
        counts.temporal++,
        (value as (...b: unknown[]) => unknown).apply(target, a)
      );
    },
  });
  const connection = new Proxy(stack.env.client.connection, {
    get(target, key) {
      if (key === 'workflowService') return counted;
      const value = Reflect.get(target, key, target) as unknown;
      return typeof value === 'function' ? (value as (...b: unknown[]) => unknown).bind(target) : value;
    },
  });
  const client = new Client({ connection, namespace: stack.env.namespace ?? 'default' });
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
  });
  const token = `${prefix}-token-0123456789`;
  const web = await startWebServer({ port: 0, token, db, client, catalog, config });
  const cookie = sessionCookie(await postLogin(web.url, token));
  return {
    web,
    cookie,
    counts,
    /** What one reading of the overview costs. */
    async reading() {
      counts.queries = 0;
      counts.temporal = 0;
      const r = await fetch(`${web.url}/api/state`, { headers: { cookie } });
      assert.equal(r.status, 200);
      assert.equal(((await r.json()) as { jobs: unknown[] }).jobs.length, n);
      return { ...counts };
    },
    async stop() {
      await web.stop();
      await db.destroy();
    },
  };
}

test("the overview's reading costs the same statements and Temporal calls for 40 jobs as for 4", async () => {
  const few = await countedWeb(4, 'flat-few');
  const many = await countedWeb(40, 'flat-many');
  try {
    const small = await few.reading();
    const large = await many.reading();
    assert.ok(small.queries > 0 && small.temporal > 0, JSON.stringify(small));
    assert.deepEqual(large, small, 'a reading of 40 jobs against one of 4');
  } finally {
    await few.stop();
    await many.stop();
  }
});

test('open pages share one reading a second, get the whole state once, then only the jobs that changed', async () => {
  const w = await countedWeb(20, 'tabs');
  const stop = new AbortController();
  try {
    const one = (await w.reading()).queries;
    w.counts.queries = 0;
    const opened = performance.now();
    const tabs = await Promise.all(
      [0, 1, 2].map(async () => {
        const r = await fetch(`${w.web.url}/api/events`, {
          headers: { cookie: w.cookie },
          signal: stop.signal,
        });
        // The stream is written past fastify's hooks: it carries the page's headers itself.
        assert.ok(r.headers.get('content-security-policy'), 'the update stream has no CSP');
        assert.equal(r.headers.get('x-frame-options'), 'DENY');
        const reader = r.body!.getReader();
        let text = '';
        // A read left waiting when `next` gave up is the next call's: its chunk is not lost.
        let reading: ReturnType<typeof reader.read> | null = null;
        /** The stream's next event, or null when none came within `ms`. */
        const next = async (ms: number): Promise<string | null> => {
          const deadline = Date.now() + ms;
          for (;;) {
            const end = text.indexOf('\n\n');
            if (end >= 0) {
              const event = text.slice(0, end);
              text = text.slice(end + 2);
              if (!event.startsWith(':')) return event;
              continue;
            }
            reading ??= reader.read();
            const chunk = await Promise.race([
              reading,
              new Promise<null>((r) => setTimeout(() => r(null), Math.max(0, deadline - Date.now()))),
            ]);
            if (chunk === null) return null;
            reading = null;
            text += Buffer.from(chunk.value!).toString();
          }
        };
        return { next };
      }),
    );
    const firsts = await Promise.all(tabs.map((t) => t.next(60_000)));
    for (const e of firsts) {
      assert.match(e!, /^data: \{"jobs":\[/, 'the whole state first');
      assert.equal((JSON.parse(e!.slice('data: '.length)) as { jobs: unknown[] }).jobs.length, 20);
    }
    // Nothing changed: no tab is sent anything for a while (whole seconds of readings).
    assert.equal(await tabs[0]!.next(2_500), null, 'an update with nothing changed');
    const readings = w.counts.queries / one;
    const seconds = (performance.now() - opened) / 1_000;
    assert.ok(readings <= seconds + 1, `${readings} readings in ${seconds.toFixed(1)} s for three tabs`);
    // One job's last run changes: each tab is sent that job's row, and no other.
    await stack.t.db
      .insertInto('job_runs')
      .values({
        job: 'tabs-7',
        kind: 'window',
        window_start: new Date('2026-06-01T00:00:00Z'),
        started_at: new Date(),
        finished_at: new Date(),
        duration_ms: 12,
        outcome: 'processed',
      })
      .execute();
    for (const t of tabs) {
      const e = await t.next(60_000);
      assert.ok(e, 'an update once a row changed');
      const [kind, data] = e.split('\n');
      assert.equal(kind, 'event: changes');
      const changed = JSON.parse(data!.slice('data: '.length)) as {
        jobs: { job: string; lastRun: unknown }[];
      };
      assert.deepEqual(
        changed.jobs.map((j) => j.job),
        ['tabs-7'],
      );
      assert.equal((changed.jobs[0]!.lastRun as { durationMs: number }).durationMs, 12);
    }
  } finally {
    stop.abort();
    await w.stop();
  }
});

test('an action is answered while its audit row waits on a lock; the row lands once the lock goes', async () => {
  const job = 'audit-wait';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'audit-wait-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  const locker = createDb(stack.t.url);
  let release: () => void = () => undefined;
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    const page = await (await fetch(`${web.url}/`, { headers: { cookie } })).text();
    const csrf = /([a-f0-9]{64})/.exec(page)![1]!;
    // Another transaction holds web_actions: no row can be added until it ends.
    const held = new Promise<void>((r) => (release = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = locker.transaction().execute(async (trx) => {
      await sql`lock table ${sql.id(schemaOf(stack.t.db), 'web_actions')} in access exclusive mode`.execute(
        trx,
      );
      locked();
      await held;
    });
    await isLocked;
    const answer = await fetch(`${web.url}/api/jobs/${job}/backfill/preview`, {
      method: 'POST',
      headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
      body: JSON.stringify({ from: '2026-06-01T00:00:00Z', to: '2026-06-01T03:00:00Z' }),
    });
    assert.equal(answer.status, 200, await answer.clone().text());
    release();
    await holding;
    const row = await eventually(
      () => stack.t.db.selectFrom('web_actions').select('action').where('job', '=', job).executeTakeFirst(),
      20_000,
      'the audit row',
    );
    assert.equal(row.action, 'POST /api/jobs/:job/backfill/preview');
  } finally {
    release();
    await locker.destroy();
    await web.stop();
  }
});

test('a NUL character in a path, query or body field is a 400 naming the field, not a 500 from PostgreSQL', async () => {
  const job = 'nul-field';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'nul-field-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    const page = await (await fetch(`${web.url}/`, { headers: { cookie } })).text();
    const csrf = /([a-f0-9]{64})/.exec(page)![1]!;
    const post = (path: string, body: unknown) =>
      fetch(`${web.url}${path}`, {
        method: 'POST',
        headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (const [r, field] of [
      [await post('/api/effects/%00/skip', { by: 'alice' }), 'key'],
      [await post('/api/effects/x/skip', { by: 'al\u0000ice' }), 'by'],
      // Accepted, it would never be recorded: the workers' insert of the request fails on it.
      [
        await post(`/api/jobs/${job}/rerun`, { window: '2026-06-01T01:00:00Z', reason: 'r\u0000', by: 'a' }),
        'reason',
      ],
      [await fetch(`${web.url}/api/incidents?job=a%00`, { headers: { cookie } }), 'job'],
    ] as const) {
      const body = await r.text();
      assert.equal(r.status, 400, body);
      assert.match((JSON.parse(body) as { error: string }).error, new RegExp(`^${field}: .*NUL`), body);
    }
    // A backslash and a u typed as text are no NUL.
    const typed = await post('/api/effects/x/skip', { by: 'al\\u0000ice' });
    assert.equal(typed.status, 404, await typed.text());
  } finally {
    await web.stop();
  }
});

test('markup in an effect error, a provider reply, an incident, a rerun reason or a pause note reaches the page as text', async () => {
  const job = 'markup';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'markup-token-0123';
  const mark = (what: string) => `<img src="/x.png" data-injected="${what}">${what}</b>`;
  const { start, windowKey, effectKey } = await doneWindowWithUnknownEffect(job, {
    channel: 'slack',
    request: { channel: '#ops', text: mark('request-text') },
    error: mark('effect-error'),
    result: { said: mark('provider-reply') },
  });
  const { db } = stack.t;
  await db
    .insertInto('incidents')
    .values({ job, subject: effectKey, kind: 'effect-unknown', last_error: mark('incident-error') })
    .execute();
  await db
    .insertInto('rerun_requests')
    .values({
      workflow_id: `${windowKey}/rerun-markup`,
      job,
      window_start: new Date(start),
      generation: 1,
      reason: mark('rerun-reason'),
      requested_by: 'alice',
      status: 'pending',
    })
    .execute();
  const handle = await stack.env.client.schedule.create({
    scheduleId: scheduleIdOf(job),
    spec: { intervals: [{ every: '1h' }] },
    action: { type: 'startWorkflow', workflowType: 'nothing', taskQueue: 'markup-none', args: [] },
    state: { paused: true, note: mark('pause-note') },
  });
  const web = await startWeb(stack, { token, catalog, env: {} });
  const browser = await launchBrowser();
  try {
    for (const [hash, shown] of [
      ['#/', ['pause-note']],
      ['#/effects', ['effect-error', 'provider-reply']],
      ['#/incidents', ['incident-error']],
      [
        `#/jobs/${job}/windows/${encodeURIComponent(windowKey)}`,
        ['effect-error', 'provider-reply', 'rerun-reason'],
      ],
    ] as const) {
      const { page, problems } = await loggedInPage(browser, web.url, token, { hash });
      for (const what of shown) {
        // Shown, as the text it is (the markup's own characters on the page)...
        await page.getByText(`>${what}</b>`).first().waitFor();
      }
      // ...and never parsed into an element.
      assert.equal(await page.locator('[data-injected]').count(), 0, `${hash}: markup became elements`);
      assert.deepEqual(problems.errors, [], hash);
      await page.context().close();
    }
  } finally {
    await browser.close();
    await handle.delete();
    await web.stop();
  }
});

test('trigger, pause or resume of a job whose Temporal Schedule does not exist yet is a 409 saying how to create it', async () => {
  const job = 'no-schedule';
  const catalog = defineCatalog([salesJob(job, { start: '2026-06-01T00:00:00Z' })]);
  const token = 'no-schedule-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    const page = await (await fetch(`${web.url}/`, { headers: { cookie } })).text();
    const csrf = /([a-f0-9]{64})/.exec(page)![1]!;
    for (const action of ['trigger', 'pause', 'resume']) {
      const r = await fetch(`${web.url}/api/jobs/${job}/${action}`, {
        method: 'POST',
        headers: { cookie, 'x-csrf-token': csrf, 'content-type': 'application/json' },
        body: '{}',
      });
      const body = await r.text();
      assert.equal(r.status, 409, `${action}: ${body}`);
      assert.match(
        (JSON.parse(body) as { error: string }).error,
        /^job: no-schedule has no Temporal Schedule yet; .*tidemark schedules sync/,
        body,
      );
    }
  } finally {
    await web.stop();
  }
});

test('guessing the token is throttled: past 20 logins a minute from one address, 429 (the right token too)', async () => {
  const catalog = defineCatalog([salesJob('throttle', { start: '2026-06-01T00:00:00Z' })]);
  const token = 'throttle-token-0123';
  const web = await startWeb(stack, { token, catalog, env: {} });
  try {
    const login = (t: string) =>
      fetch(`${web.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: t }),
        redirect: 'manual',
      });
    const answers: number[] = [];
    for (let i = 0; i < 20; i++) answers.push((await login(`wrong-guess-${i}`)).status);
    assert.deepEqual(new Set(answers), new Set([401]));
    const throttled = await login(token);
    assert.equal(throttled.status, 429);
    assert.match(await throttled.text(), /too many logins from this address/);
  } finally {
    await web.stop();
  }
});

// A body over the limit, and the update stream of a session that expires or logs out. On a Temporal
// namespace and database of their own.
describe('a body over the limit, and the update stream of a session that ends', () => {
  const stack = realStack();
  const TOKEN = 'review-operator-token-1';
  const bearer = { authorization: `Bearer ${TOKEN}` };
  test('a body over the limit is a 413 that closes its connection, so the next request does not fail', async () => {
    const job = 'review-big-body';
    const catalog = defineCatalog([salesJob(job, { start: '2026-06-07T00:00:00Z', lateness: '0m' })]);
    const web = await startWeb(stack, {
      token: TOKEN,
      catalog,
      env: { TIDEMARK_TASK_QUEUE: uniqueQueue(job) },
    });
    try {
      const post = async (body: string | Buffer) => {
        const r = await fetch(`${web.url}/api/jobs/${job}/backfill`, {
          method: 'POST',
          headers: { ...bearer, 'content-type': 'application/json' },
          body,
        });
        return { status: r.status, connection: r.headers.get('connection'), text: await r.text() };
      };
      for (let i = 0; i < 3; i++) {
        const big = await post(Buffer.alloc(200_000, 0x20));
        assert.equal(big.status, 413, big.text);
        assert.equal(big.connection, 'close');
        const next = await post('{"from": "x", "to": "y"}').catch((e: Error) => ({
          status: 0,
          connection: null,
          text: String(e.cause ?? e),
        }));
        assert.equal(next.status, 400, `the request after a 413: ${next.text}`);
      }
    } finally {
      await web.stop();
    }
  });

  test('the update stream of a session that expires or logs out ends, so the page hears it', async () => {
    const job = 'review-sse';
    const catalog = defineCatalog([salesJob(job, { start: '2026-06-08T00:00:00Z', lateness: '0m' })]);
    let now = new Date('2026-11-30T12:00:00Z');
    const web = await startWeb(stack, {
      token: TOKEN,
      catalog,
      env: { TIDEMARK_TASK_QUEUE: uniqueQueue(job), TIDEMARK_WEB_SESSION_TTL: '1h' },
      now: () => now,
    });
    try {
      const cookie = sessionCookie(await postLogin(web.url, TOKEN));
      const events = await fetch(`${web.url}/api/events`, { headers: { cookie } });
      const reader = events.body!.getReader();
      assert.equal((await reader.read()).done, false, 'a first update');
      now = new Date('2026-11-30T13:00:01Z');
      const deadline = Date.now() + 10_000;
      let ended = false;
      while (!ended && Date.now() < deadline)
        ended = await Promise.race([
          reader.read().then((r) => r.done),
          new Promise<boolean>((r) => setTimeout(() => r(false), deadline - Date.now())),
        ]);
      assert.ok(ended, 'the stream of an expired session ended');
    } finally {
      await web.stop();
    }
  });
});
