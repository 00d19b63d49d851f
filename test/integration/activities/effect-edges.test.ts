// The effect guard at its edges (issue 8, items 1-6), driven directly against a real database
// and real providers on loopback: attempts interleaved at each step by a held row lock, a lease
// that passed where the channel is not configured, chat 5xx, a resend decision used once,
// plain webhooks, two effects of one name.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { inspect } from 'node:util';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { sql } from 'kysely';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { decideUnknownEffect, retryFailedEffect } from '../../../activities/decisions.js';
import type { ActivityDeps } from '../../../activities/deps.js';
import { raiseNow } from '../../../activities/direct-alerts.js';
import { effectActivities } from '../../../activities/effects.js';
import type { HttpRequest } from '../../../contract/effects.js';
import { httpApiProvider } from '../../../activities/notify/http-api.js';
import { redactor } from '../../../workers/channels.js';
import { EffectError } from '../../../activities/notify/provider.js';
import { slackProvider } from '../../../activities/notify/slack.js';
import { telegramProvider } from '../../../activities/notify/telegram.js';
import { windowActivities } from '../../../activities/window.js';
import { decideEffect, recordEffects, type NewEffect } from '../../../db/effects.js';
import { readWatermark } from '../../../db/ledger.js';
import type { EffectPolicy } from '../../../db/schema.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { type WindowEffect } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import { startChat, type ChatAnswer, type TestChat } from '../../helpers/chat.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';
import { chatTexts, depsWithChannels, effectAttempts, effectRow } from '../../helpers/effects.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { listenOnLoopback } from '../../helpers/net.js';
import { startSmtp, type TestSmtp } from '../../helpers/smtp.js';
import { eventually } from '../../helpers/temporal.js';

let t: TestDb;
let smtp: TestSmtp;
let chat: TestChat;
/** One connection of its own, to look at pg_stat_activity while others wait. */
let watcher: pg.Pool;
before(async () => {
  [t, smtp, chat] = await Promise.all([createTestDb(), startSmtp(), startChat()]);
  watcher = new pg.Pool({ connectionString: t.url, max: 1 });
});
after(async () => {
  await watcher?.end();
  await smtp?.close();
  await chat?.close();
  await t?.drop();
});

const catalog = defineCatalog([salesJob('edges', { alerts: { telegram: ['ops-chat'] } })]);

/** Deps whose clock runs `aheadMs` ahead: leases are judged on the database's clock, so this changes no lease. */
function depsAt(aheadMs = 0, extra: Partial<ActivityDeps> = {}): ActivityDeps {
  const base = depsWithChannels(t.db, catalog, smtp, chat);
  return {
    ...base,
    now: () => new Date(Date.now() + aheadMs),
    channels: { ...base.channels, http: httpApiProvider({ timeoutMs: 500 }) },
    ...extra,
  };
}

/** Makes the effect's lease pass on the database's clock, as if its attempt had outlived it. */
async function expireLease(key: string): Promise<void> {
  await sql`update ${tm.effects} set lease_until = now() - interval '1 second' where effect_key = ${key}`.execute(
    t.db,
  );
}

/**
 * An HTTP API on loopback that counts the requests it receives. Its status view can lag (says
 * 404 although the request was applied), and it can apply a request and answer too late.
 */
async function startApi() {
  const posts: string[] = [];
  const authorizations: (string | undefined)[] = [];
  const state = { statusLags: false, hang: false, hangMs: 2_000 };
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'GET') {
        const key = decodeURIComponent(req.url!.slice('/status/'.length));
        res.writeHead(!state.statusLags && posts.includes(key) ? 200 : 404).end();
        return;
      }
      for await (const _ of req) void _;
      posts.push(String(req.headers['idempotency-key'] ?? ''));
      authorizations.push(req.headers.authorization);
      const reply = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      if (state.hang) setTimeout(reply, state.hangMs);
      else reply();
    })();
  });
  return { ...(await listenOnLoopback(server)), posts, authorizations, state };
}
type Api = Awaited<ReturnType<typeof startApi>>;

/** Records one effect of job "edges" outside any window; its provider key is its own key. */
async function recordEdge(
  key: string,
  effect: Pick<NewEffect, 'name' | 'channel' | 'request'> & { policy?: EffectPolicy },
): Promise<void> {
  const { policy = 'ask', ...rest } = effect;
  await recordEffects(t.db, [{ key, job: 'edges', windowKey: null, policy, providerKey: key, ...rest }]);
}

/** Records a Slack message to #ops, policy ask. */
const recordSlack = (key: string, name: string, text: string): Promise<void> =>
  recordEdge(key, { name, channel: 'slack', request: { channel: '#ops', text } });

async function recordHttp(
  api: Api,
  key: string,
  opts: { policy?: EffectPolicy; statusUrl?: boolean; honoursIdempotencyKey?: boolean } = {},
): Promise<void> {
  const request: HttpRequest = {
    method: 'POST',
    url: `${api.url}/hook`,
    body: { key },
    ...(opts.statusUrl ? { statusUrl: `${api.url}/status/${encodeURIComponent(key)}` } : {}),
    ...(opts.honoursIdempotencyKey !== undefined
      ? { honoursIdempotencyKey: opts.honoursIdempotencyKey }
      : {}),
  };
  await recordEdge(key, { name: 'push', channel: 'http', policy: opts.policy, request });
}

/** Runs a test against its own API on loopback, closed however the test ends. */
async function withApi(body: (api: Api) => Promise<void>): Promise<void> {
  const api = await startApi();
  try {
    await body(api);
  } finally {
    await api.close();
  }
}

/** One attempt at the effect by a worker with `deps` (by default: every channel, its clock in step). */
const perform = (key: string, deps: ActivityDeps = depsAt()) => effectActivities(deps).performEffect({ key });

/** The outcome a settled call ended with (undefined for an error without one). */
const outcomeOf = (r: unknown): string | undefined => (r as { outcome?: string }).outcome;

/** Overwrites columns of the effect's row. */
async function setEffect(key: string, values: Record<string, unknown>): Promise<void> {
  await t.db.updateTable('effects').set(values).where('effect_key', '=', key).execute();
}

/** Sets an effect's row as an earlier attempt left it. */
async function leaveAs(key: string, status: 'unknown' | 'begun', extra: Record<string, unknown> = {}) {
  await setEffect(key, { status, fence: 1, attempts: 1, begun_at: new Date(Date.now() - 600_000), ...extra });
}

/** Raises the "effect outcome unknown" alert a workflow raises for the effect. */
async function raiseUnknown(key: string): Promise<void> {
  await raiseNow(depsAt(), { job: 'edges', subject: key, kind: 'effect-unknown', error: 'outcome unknown' });
}

/** Watches the ops Telegram chat: the result reads the alerts sent since. */
function watchAlerts(): () => string[] {
  const before = chatTexts(chat, 'telegram').length;
  return () => chatTexts(chat, 'telegram').slice(before);
}

/** Takes the effect's row lock in its own connection: every UPDATE of the row queues behind it, in order. */
async function holdRow(key: string): Promise<{ release(): Promise<void> }> {
  const c = new pg.Client({ connectionString: t.url });
  await c.connect();
  await c.query('begin');
  await c.query(`select 1 from ${SCHEMA}.effects where effect_key = $1 for update`, [key]);
  return {
    async release() {
      await c.query('commit');
      await c.end();
    },
  };
}

/** Waits until `n` statements are queued on a row lock of the effects table. */
async function lockWaiters(n: number): Promise<void> {
  await eventually(
    async () => {
      const r = await watcher.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and query ilike 'update "${SCHEMA}"."effects"%'`,
      );
      return r.rows[0]!.n >= n ? true : undefined;
    },
    10_000,
    `${n} updates waiting on the effect's row lock`,
  );
}

/** A gate a hook waits on until the test opens it. */
function gate() {
  let open!: () => void;
  let entered!: () => void;
  const reached = new Promise<void>((r) => (entered = r));
  const opened = new Promise<void>((r) => (open = r));
  return {
    open,
    reached,
    wait: async () => {
      entered();
      await opened;
    },
  };
}

/** What a promise ended with, caught at once so that a rejection is never unhandled while the test waits. */
const settled = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    (v) => v,
    (err: unknown) => err,
  );

/** Attempt 1 sends, then waits for its answer until the test calls `answer`. */
async function attemptAwaitingAnswer(key: string) {
  const sending = gate();
  const first = perform(key, depsAt(0, { hooks: { afterEffect: sending.wait } }));
  await sending.reached;
  return { first, answer: sending.open };
}

/** Attempt 1 sends and outlives its lease; another worker (policy ask) then finds the outcome unknown. */
async function attemptOutlivedItsLease(key: string) {
  const attempt = await attemptAwaitingAnswer(key);
  await expireLease(key);
  assert.equal((await perform(key)).outcome, 'unknown');
  return attempt;
}

/** Attempt 1 sends and outlives its lease; its "done" then queues behind a row lock the test holds. */
async function attemptQueuedBehindLock(key: string) {
  let lock: { release(): Promise<void> } | undefined;
  const first = perform(
    key,
    depsAt(0, {
      hooks: {
        afterEffect: async () => {
          await expireLease(key);
          lock = await holdRow(key);
        },
      },
    }),
  );
  await lockWaiters(1);
  return { first, lock: { release: () => lock!.release() } };
}

/**
 * Queues `rival`'s claim behind the held lock, after the update already waiting there, then
 * releases the lock: the two commit in that order. What `rival` ended with.
 */
async function claimAfter(lock: { release(): Promise<void> }, rival: Promise<unknown>): Promise<unknown> {
  const second = settled(rival);
  await lockWaiters(2);
  await lock.release();
  return await second;
}

// Item 1: attempt 2 reads "begun, lease passed" and decides to act; attempt 1 then commits done;
// attempt 2's claim must fail. The row lock queues attempt 1's settle before attempt 2's claim.
for (const scenario of ['policy resend', 'a status check that said absent'] as const) {
  test(`a lease race with ${scenario}: the late claim loses, one provider call`, () =>
    withApi(async (api) => {
      const key = `edges/race-${scenario.replace(/\W+/g, '-')}:push`;
      await recordHttp(api, key, scenario === 'policy resend' ? { policy: 'resend' } : { statusUrl: true });
      api.state.statusLags = true;
      const { first, lock } = await attemptQueuedBehindLock(key);
      assert.equal(api.posts.length, 1, 'attempt 1 sent');
      const second = await claimAfter(lock, perform(key));
      assert.equal((await first).outcome, 'done');
      assert.equal(outcomeOf(second), 'already-done', `the late claim must lose: ${inspect(second)}`);
      assert.equal((await perform(key)).outcome, 'already-done');
      assert.equal(api.posts.length, 1, 'exactly one provider call');
      assert.equal((await effectRow(t.db, key)).status, 'done');
    }));
}

test('a worker that finds the lease passed while the first attempt commits done: the effect stays done', () =>
  withApi(async (api) => {
    const key = 'edges/race-resolver:push';
    await recordHttp(api, key);
    const { first, lock } = await attemptQueuedBehindLock(key);
    // Policy ask and no way to check: it would settle unknown, and then a person is asked to resend.
    const second = await claimAfter(lock, perform(key));
    assert.equal((await first).outcome, 'done');
    assert.equal(outcomeOf(second), 'already-done', inspect(second));
    assert.equal((await effectRow(t.db, key)).status, 'done', 'the answer is not overwritten by "unknown"');
    assert.equal(api.posts.length, 1);
  }));

test('an operator resend while the first attempt is still alive: its late answer wins, one provider call', () =>
  withApi(async (api) => {
    const key = 'edges/race-operator:push';
    await recordHttp(api, key);
    const { first, answer } = await attemptAwaitingAnswer(key);
    await expireLease(key);
    assert.equal(api.posts.length, 1, 'attempt 1 sent and has not answered yet');
    // Another worker finds the lease passed: unknown (policy ask).
    assert.equal((await perform(key)).outcome, 'unknown');
    // An operator decides to resend; the resend reads the row, then attempt 1's answer and the
    // resend's claim race: the answer queues first.
    assert.ok(await decideEffect(t.db, key, 'resend', 'alice', new Date()));
    const lock = await holdRow(key);
    answer();
    await lockWaiters(1);
    const resend = await claimAfter(lock, perform(key));
    assert.equal((await first).outcome, 'done');
    assert.equal(
      outcomeOf(resend),
      'already-done',
      `the resend read a state that is gone: ${inspect(resend)}`,
    );
    assert.equal(api.posts.length, 1, 'exactly one provider call');
    assert.equal((await effectRow(t.db, key)).status, 'done');
  }));

test('a lease that passed where the channel is not configured is unknown, never failed', async () => {
  const key = 'edges/no-provider:alert';
  await recordSlack(key, 'alert', 'hello');
  await leaveAs(key, 'begun', { lease_until: new Date(Date.now() - 540_000) });
  const before = chat.messages.length;
  const r = await settled(perform(key, depsAt(0, { channels: {} })));
  const row = await effectRow(t.db, key);
  assert.equal(row.status, 'unknown', `maybe sent must stay unknown (got ${row.status}: ${row.last_error})`);
  assert.equal(outcomeOf(r), 'unknown');
  await assert.rejects(retryFailedEffect(depsAt(0), key, 'alice'), /is unknown, not failed/);
  assert.equal(chat.messages.length, before, 'nothing resent');
});

// Item 3: a 5xx, a gateway error or Slack's internal_error may have been applied.
for (const [api, answer] of [
  ['slack', 'error-500'],
  ['slack', 'bad-gateway'],
  ['slack', 'gateway-timeout'],
  ['slack', 'internal-error'],
  ['telegram', 'error-500'],
  ['telegram', 'bad-gateway'],
  ['telegram', 'gateway-timeout'],
] as const) {
  test(`${api} answering ${answer} is an unknown outcome, not "not sent"`, async () => {
    chat.plan[api].push(answer as ChatAnswer);
    const provider =
      api === 'slack'
        ? slackProvider({ token: 'xoxb-test', apiUrl: chat.slackUrl })
        : telegramProvider({ token: '123:test', apiUrl: chat.telegramUrl });
    const err = await (provider.perform as (r: unknown, k: string) => Promise<unknown>)(
      api === 'slack' ? { channel: '#ops', text: 'x' } : { chatId: 'ops', text: 'x' },
      'k',
    ).catch((e: unknown) => e);
    assert.ok(err instanceof EffectError, String(err));
    assert.equal(err.kind, 'unknown', err.message);
  });
}

test('through the guard, a Slack 500 leaves the message unknown (policy ask), not failed and resent', async () => {
  const key = 'edges/slack-500:post';
  await recordSlack(key, 'post', 'maybe');
  const before = chat.requests.length;
  chat.plan.slack.push('error-500');
  const r = await perform(key);
  assert.equal(r.outcome, 'unknown');
  assert.equal((await perform(key)).outcome, 'unknown');
  assert.equal(chat.requests.length - before, 1, 'not sent again');
  assert.equal((await effectRow(t.db, key)).status, 'unknown');
});

test('a resend decision is used by one resend; unknown again, it alerts again and is not resent on its own', () =>
  withApi(async (api) => {
    const key = 'edges/resend-once:push';
    await recordHttp(api, key);
    api.state.hang = true;
    assert.equal((await perform(key)).outcome, 'unknown');
    const alertsSince = watchAlerts();
    await raiseUnknown(key);
    assert.equal(alertsSince().length, 1, 'the first alert');

    const r = await decideUnknownEffect(depsAt(), key, 'resend', 'alice');
    assert.equal(r.outcome, 'unknown');
    assert.equal(api.posts.length, 2, 'resent once');
    const row = await effectRow(t.db, key);
    assert.deepEqual([row.status, row.decision], ['unknown', null], 'the decision was used');
    const alerts = alertsSince();
    assert.equal(alerts.length, 2, 'asked again');
    assert.match(alerts[1]!, /effect outcome unknown/);
    assert.match(alerts[1]!, /resent by alice/);

    // The window driven again (a retry, a re-run): not resent without a new decision.
    assert.equal((await perform(key)).outcome, 'unknown');
    assert.equal(api.posts.length, 2, 'no resend without a new decision');
  }));

test('a plain webhook whose reply is lost follows its policy (ask): not resent', () =>
  withApi(async (api) => {
    const key = 'edges/plain-webhook:push';
    await recordHttp(api, key);
    api.state.hang = true;
    const first = await settled(perform(key));
    assert.equal(outcomeOf(first), 'unknown', String(first));
    api.state.hang = false;
    const again = await settled(perform(key));
    assert.equal(outcomeOf(again), 'unknown', String(again));
    assert.equal(api.posts.length, 1, 'not resent');
    assert.equal((await effectRow(t.db, key)).status, 'unknown');
  }));

/** A webhook whose first reply is lost, then an attempt that gets through: the second must be done. */
async function lostReplyThenDone(api: Api, key: string): Promise<void> {
  api.state.hang = true;
  await assert.rejects(perform(key), /no reply/);
  api.state.hang = false;
  assert.equal((await perform(key)).outcome, 'done');
}

test('a webhook declared to honour Idempotency-Key is resent with the same key', () =>
  withApi(async (api) => {
    const key = 'edges/idempotent-webhook:push';
    await recordHttp(api, key, { honoursIdempotencyKey: true });
    await lostReplyThenDone(api, key);
    assert.deepEqual(api.posts, [key, key]);
  }));

test('a webhook whose lost reply can be checked at its status URL is asked before any resend', () =>
  withApi(async (api) => {
    const key = 'edges/checked-webhook:push';
    await recordHttp(api, key, { statusUrl: true });
    await lostReplyThenDone(api, key);
    assert.equal(api.posts.length, 1, 'the status URL confirmed it: not sent again');
  }));

/** Runs window 2026-08-01T00:00Z of a job whose handler returns `effects`; what was thrown, if anything. */
async function processWith(job: string, effects: unknown[]): Promise<unknown> {
  const cat = defineCatalog([
    salesJob(job, {
      start: '2026-08-01T00:00:00Z',
      handler: async (ctx) => ({ ...(await summariseWindow(ctx)), effects: effects as WindowEffect[] }),
    }),
  ]);
  await insertOrders(t.db, ordersBetween(job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z', 3));
  return await windowActivities({ ...depsAt(), catalog: cat })
    .processWindow({
      job,
      start: '2026-08-01T00:00:00.000Z',
      end: '2026-08-01T01:00:00.000Z',
      generation: 0,
      key: `${job}/2026-08-01T00:00:00Z`,
      trigger: 'manual',
      policy: { retry: { maximumAttempts: 1 }, startToCloseTimeoutMs: 10_000 },
    } as never)
    .then(
      () => undefined,
      (err: unknown) => err,
    );
}

async function nothingCommitted(job: string): Promise<void> {
  const effects = await t.db.selectFrom('effects').select('effect_key').where('job', '=', job).execute();
  assert.deepEqual(effects, [], 'no effect recorded');
  assert.equal(await readWatermark(t.db, job), undefined, 'the watermark did not move');
  const summary = await t.db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', job)
    .where('status', '=', 'done')
    .execute();
  assert.deepEqual(summary, [], 'the window is not done');
}

/** Runs the window with `effects`: it must be refused for good, and nothing committed; the refusal. */
async function refused(job: string, effects: unknown[], match: RegExp[]): Promise<void> {
  const err = await processWith(job, effects);
  assert.ok(err instanceof ApplicationFailure, String(err));
  assert.equal(err.nonRetryable, true, err.message);
  for (const m of match) assert.match(err.message, m);
  await nothingCommitted(job);
}

test('two effects with one name in a window are refused, naming job, window and effect; nothing committed', async () => {
  const mail = (text: string) => ({
    name: 'report',
    channel: 'email',
    request: { to: ['a@x.test'], subject: 's', text },
  });
  await refused(
    'edges-twice',
    [mail('one'), mail('two')],
    [/edges-twice/, /edges-twice\/2026-08-01T00:00:00Z/, /"report"/],
  );
});

test('an http effect whose honoursIdempotencyKey is not a boolean is refused, naming the field', async () => {
  const request = { method: 'POST', url: 'http://127.0.0.1:9/x', body: {}, honoursIdempotencyKey: 'yes' };
  await refused('edges-bad-http', [{ name: 'push', channel: 'http', request }], [/honoursIdempotencyKey/]);
});

// ---- Late answers around an operator's decision, checkable webhooks, bad declarations, lost replies ----

test('a late "done" while an operator\'s resend holds the effect is kept; the effect is done, nobody is asked again', () =>
  withApi(async (api) => {
    const key = 'edges/review-late-done-over-resend:push';
    await recordHttp(api, key);
    const { first, answer } = await attemptOutlivedItsLease(key);
    const alertsSince = watchAlerts();
    // The operator resends; the resend's reply is lost (it will be unknown again) ...
    api.state.hang = true;
    const slowReply = depsAt(0, {
      channels: { ...depsAt().channels, http: httpApiProvider({ timeoutMs: 1_500 }) },
    });
    const resend = settled(decideUnknownEffect(slowReply, key, 'resend', 'alice'));
    await eventually(async () => (api.posts.length === 2 ? true : undefined), 10_000, 'the resend posted');
    // ... and attempt 1's "done" arrives while the resend waits for its reply.
    answer();
    assert.equal((await first).outcome, 'done');
    const r = await resend;
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'done', `the provider said done: ${row.status} ${row.last_error} ${inspect(r)}`);
    assert.equal(
      alertsSince().filter((m) => /unknown again/.test(m)).length,
      0,
      'nobody is asked to resend an effect the provider said was done',
    );
  }));

test('a late "done" after an operator skipped it turns the effect done', () =>
  withApi(async (api) => {
    const key = 'edges/review-late-done-over-skip:push';
    await recordHttp(api, key);
    const { first, answer } = await attemptOutlivedItsLease(key);
    await decideUnknownEffect(depsAt(), key, 'skip', 'alice');
    answer();
    assert.equal((await first).outcome, 'done');
    assert.equal((await effectRow(t.db, key)).status, 'done');
    assert.equal(api.posts.length, 1);
  }));

test('an operator resend of a checkable webhook whose reply is lost is unknown again, and the status URL is asked before the next resend', () =>
  withApi(async (api) => {
    const key = 'edges/review-resend-checkable:push';
    await recordHttp(api, key, { statusUrl: true });
    await leaveAs(key, 'unknown', { last_error: 'the status URL could not tell' });
    api.state.hang = true;
    api.state.statusLags = true;
    const alertsSince = watchAlerts();
    const r = await settled(decideUnknownEffect(depsAt(), key, 'resend', 'alice'));
    assert.equal(api.posts.length, 1, 'resent once');
    const row = await effectRow(t.db, key);
    assert.deepEqual(
      [row.status, row.decision],
      ['unknown', null],
      `not left "begun" with nobody to ask the provider: ${inspect(r)}`,
    );
    assert.equal(alertsSince().filter((m) => /unknown again/.test(m)).length, 1, 'asked again');
    // The next decision asks the status URL first: it was applied, so nothing is sent again.
    api.state.statusLags = false;
    const again = await decideUnknownEffect(depsAt(), key, 'resend', 'bob');
    assert.equal(again.outcome, 'done');
    assert.equal(api.posts.length, 1, 'not sent again');
  }));

test('a checkable webhook whose reply stays lost after the attempts are used up can be decided by a person', () =>
  withApi(async (api) => {
    const key = 'edges/review-checkable-exhausted:push';
    await recordHttp(api, key, { statusUrl: true });
    api.state.hang = true;
    api.state.statusLags = true;
    // The workflow's attempts: the first loses its reply; each later one hears "absent", resends, loses it again.
    for (let i = 0; i < 3; i++) await settled(perform(key));
    const row = await effectRow(t.db, key);
    assert.notEqual(row.status, 'begun', 'no attempt will follow: the effect must be left for a person');
    const r = await decideUnknownEffect(depsAt(), key, 'skip', 'alice');
    assert.equal(r.outcome, 'skipped');
  }));

const bad = (request: unknown, extra: Record<string, unknown> = {}) => ({
  name: 'push',
  channel: 'http',
  request,
  ...extra,
});
for (const [field, effect] of [
  ['url', bad({ method: 'POST', url: 'not a url', body: {} })],
  ['url', bad({ method: 'POST', url: 'file:///etc/passwd', body: {} })],
  ['method', bad({ method: 'DELETE', url: 'http://127.0.0.1:9/x', body: {} })],
  [
    'statusUrl',
    bad({ method: 'POST', url: 'http://127.0.0.1:9/x', body: {}, statusUrl: 'ftp://127.0.0.1/s' }),
  ],
  ['request', bad(null)],
  ['request', { name: 'mail', channel: 'email', request: 'to everyone' }],
  ['policy', bad({ method: 'POST', url: 'http://127.0.0.1:9/x', body: {} }, { policy: 'resnd' })],
  ['request', bad({ method: 'POST', url: 'http://127.0.0.1:9/x', body: { n: 1n } })],
] as const) {
  test(`an effect with a bad ${field} (${inspect(effect, { breakLength: Infinity })}) is refused before anything commits`, async () => {
    const job = `edges-bad-${field.toLowerCase()}-${Math.random().toString(36).slice(2, 8)}`;
    await refused(
      job,
      [effect],
      [new RegExp(field === 'policy' || field === 'request' ? field : `request\\.${field}`)],
    );
  });
}

test('two effects whose names differ only in type (1 and "1") share a key: refused, not dropped', async () => {
  const mail = (name: unknown) => ({
    name,
    channel: 'email',
    request: { to: ['a@x.test'], subject: 's', text: 't' },
  });
  await refused('edges-name-types', [mail(1), mail('1')], [/name/]);
});

test('an effect on a channel that does not exist is refused before anything commits', async () => {
  await refused('edges-bad-channel', [{ name: 'sms', channel: 'sms', request: { to: '+1' } }], [/channel/]);
});

test('a webhook token in the URL path never reaches the effect row, its attempts or the logs', () =>
  withApi(async (api) => {
    const key = 'edges/review-secret-path:push';
    const secret = 'XsEcReTtOkEn123456';
    const deps = depsAt();
    await recordEdge(key, {
      name: 'push',
      channel: 'http',
      request: { method: 'POST', url: `${api.url}/services/T0/B0/${secret}`, body: {} },
    });
    api.state.hang = true;
    await settled(perform(key, deps));
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'unknown');
    const attempts = await effectAttempts(t.db, key);
    assert.doesNotMatch(String(row.last_error), new RegExp(secret));
    assert.doesNotMatch(JSON.stringify(attempts), new RegExp(secret));
    assert.doesNotMatch(JSON.stringify(deps.logger), new RegExp(secret));
  }));

test("an http effect's header from a secret is sent; the secret reaches neither the effect row, its attempts nor the logs", () =>
  withApi(async (api) => {
    const key = 'edges/secret-header:push';
    const secret = 'sEcReT-bearer-77130';
    const base = depsAt();
    const deps = {
      ...base,
      channels: {
        ...base.channels,
        http: httpApiProvider({ secret: (n) => (n === 'SHOP_TOKEN' ? secret : undefined) }),
      },
      redact: redactor([secret]),
    };
    const request: HttpRequest = {
      method: 'POST',
      url: `${api.url}/hook`,
      body: { n: 1 },
      headers: { authorization: { secret: 'SHOP_TOKEN', prefix: 'Bearer ' }, 'x-shop': 'north' },
    };
    await recordEdge(key, { name: 'push', channel: 'http', request });
    await perform(key, deps);
    assert.deepEqual(api.authorizations, [`Bearer ${secret}`]);
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'done');
    const stored = JSON.stringify(row) + JSON.stringify(await effectAttempts(t.db, key));
    assert.doesNotMatch(stored, new RegExp(secret));
    assert.match(stored, /SHOP_TOKEN/);
    assert.doesNotMatch(JSON.stringify(deps.logger), new RegExp(secret));
  }));

test('an http effect whose secret is not set on the worker is rejected, naming the variable, and nothing is sent', () =>
  withApi(async (api) => {
    const key = 'edges/secret-missing:push';
    await recordEdge(key, {
      name: 'push',
      channel: 'http',
      request: {
        method: 'POST',
        url: `${api.url}/hook`,
        body: {},
        headers: { authorization: { secret: 'NOT_SET' } },
      },
    });
    await settled(perform(key));
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'failed', String(row.last_error));
    assert.match(String(row.last_error), /TIDEMARK_SECRET_NOT_SET is not set on this worker/);
    assert.deepEqual(api.posts, []);
  }));

test('a credential header written as plain text, or a secret reference of the wrong shape, is refused before anything commits', async () => {
  const http = (headers: unknown) => ({
    name: 'push',
    channel: 'http',
    request: { method: 'POST', url: 'http://127.0.0.1:9/x', body: {}, headers },
  });
  await refused(
    'edges-plain-token',
    [http({ Authorization: 'Bearer abc' })],
    [/request\.headers\.Authorization looks like a credential.*TIDEMARK_SECRET_NAME/],
  );
  await refused(
    'edges-bad-ref',
    [http({ 'x-api-key': { secret: 'lower case' } })],
    [/request\.headers\.x-api-key must be a string or \{ secret/],
  );
  await refused('edges-bad-header', [http({ 'bad header': 'x' })], [/"bad header" is not a header name/]);
  for (const name of ['X-Credentials', 'X-Pwd', 'X-Passwd', 'X-Jwt', 'X-Session-Id', 'X-Hmac', 'X-Sig'])
    await refused(
      `edges-plain-${name.toLowerCase()}`,
      [http({ [name]: 'hunter2' })],
      [new RegExp(`request\\.headers\\.${name} looks like a credential`)],
    );
  // What the HTTP client would refuse after the commit (and report as a lost reply) is refused before it.
  await refused('edges-header-euro', [http({ 'x-note': 'price in €' })], [/request\.headers\.x-note holds/]);
  for (const name of ['Transfer-Encoding', 'content-length', 'Expect', 'Host', 'Connection'])
    await refused(
      `edges-header-${name.toLowerCase()}`,
      [http({ [name]: '1' })],
      [new RegExp(`request\\.headers\\.${name} is set by the HTTP client`)],
    );
  await refused(
    'edges-header-prefix',
    [http({ authorization: { secret: 'SHOP_TOKEN', prefix: 'Bearer \r\nX-Evil: 1' } })],
    [/request\.headers\.authorization holds/],
  );
});

test('an http effect whose secret cannot go into a header fails, naming the variable, and nothing is sent', () =>
  withApi(async (api) => {
    const key = 'edges/secret-crlf:push';
    const base = depsAt();
    const deps = {
      ...base,
      channels: {
        ...base.channels,
        http: httpApiProvider({ secret: (n) => (n === 'BAD' ? 'tok\r\nX-Injected: yes' : undefined) }),
      },
    };
    await recordEdge(key, {
      name: 'push',
      channel: 'http',
      request: {
        method: 'POST',
        url: `${api.url}/hook`,
        body: {},
        headers: { authorization: { secret: 'BAD' } },
      },
    });
    await settled(perform(key, deps));
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'failed', String(row.last_error));
    assert.match(String(row.last_error), /TIDEMARK_SECRET_BAD holds a character a header cannot carry/);
    assert.doesNotMatch(String(row.last_error), /tok|Injected/);
    assert.deepEqual(api.posts, []);
  }));

test("an effect's retry policy of the wrong shape is refused before anything commits, naming the field", async () => {
  const withRetry = (retry: unknown) => ({
    name: 'push',
    channel: 'http',
    request: { method: 'POST', url: 'http://127.0.0.1:9/x', body: {} },
    retry,
  });
  await refused(
    'edges-retry-attempts',
    [withRetry({ maximumAttempts: 0 })],
    [/effect "push": retry\.maximumAttempts must be a whole number from 1 to 100/],
  );
  await refused(
    'edges-retry-interval',
    [withRetry({ initialInterval: 'soon' })],
    [/effect "push": retry\.initialInterval must be a duration such as "500ms", "10s" or "5m"/],
  );
  await refused(
    'edges-retry-order',
    [withRetry({ initialInterval: '1m', maximumInterval: '1s' })],
    [/effect "push": retry\.maximumInterval must not be shorter than retry\.initialInterval/],
  );
  // Temporal reads durations itself: what it would refuse after the commit is refused before it.
  await refused(
    'edges-retry-zero',
    [withRetry({ initialInterval: '0ms' })],
    [/retry\.initialInterval must be a duration such as/],
  );
  await refused(
    'edges-retry-space',
    [withRetry({ maximumInterval: ' 20ms' })],
    [/retry\.maximumInterval must be a duration such as/],
  );
  await refused('edges-retry-nan', [withRetry({ maximumAttempts: NaN })], [/\(got NaN\)/]);
  await refused(
    'edges-retry-unknown',
    [withRetry({ attempts: 3 })],
    [
      /effect "push": retry\.attempts is not a retry setting \(maximumAttempts, initialInterval, maximumInterval, backoffCoefficient\)/,
    ],
  );
});

test('a resend decided where the channel is not configured is refused and not left to resend later', async () => {
  const key = 'edges/review-decide-unconfigured:post';
  await recordSlack(key, 'post', 'decide me');
  await leaveAs(key, 'unknown', { last_error: 'no reply' });
  const before = chat.requests.length;
  await assert.rejects(
    decideUnknownEffect(depsAt(0, { channels: {} }), key, 'resend', 'alice'),
    /not configured/,
  );
  const row = await effectRow(t.db, key);
  assert.deepEqual(
    [row.status, row.decision],
    ['unknown', null],
    'the failed command left no decision behind',
  );
  // A worker that drives the window's open effects later must not resend on that decision.
  assert.equal((await perform(key)).outcome, 'unknown');
  assert.equal(chat.requests.length, before, 'nothing sent');
});

test('a lost reply is recorded unknown even where a resend is allowed (policy resend, an idempotent target), never failed', () =>
  withApi(async (api) => {
    for (const opts of [{ policy: 'resend' as const }, { honoursIdempotencyKey: true }]) {
      const key = `edges/review-lost-reply-${Object.keys(opts)[0]}:push`;
      await recordHttp(api, key, opts);
      api.state.hang = true;
      await assert.rejects(perform(key), /no reply/);
      const row = await effectRow(t.db, key);
      assert.equal(
        row.status,
        'unknown',
        `the target received it: maybe sent, not "certainly not sent" (${key})`,
      );
      await assert.rejects(retryFailedEffect(depsAt(), key, 'alice'), /is unknown, not failed/);
      // The policy (or the target's idempotency) still resends it on the next attempt.
      api.state.hang = false;
      assert.equal((await perform(key)).outcome, 'done');
    }
  }));

test('an operator retry whose reply is lost leaves the effect unknown and asks a person, not "the next attempt" that never comes', () =>
  withApi(async (api) => {
    const key = 'edges/review-retry-lost:push';
    await recordHttp(api, key, { statusUrl: true });
    await setEffect(key, { status: 'failed', fence: 1, attempts: 1, last_error: 'connection refused' });
    api.state.hang = true;
    api.state.statusLags = true;
    const alertsSince = watchAlerts();
    const r = await settled(retryFailedEffect(depsAt(), key, 'alice'));
    assert.equal(outcomeOf(r), 'unknown', inspect(r));
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'unknown');
    const alerts = alertsSince();
    assert.equal(alerts.filter((m) => /effect outcome unknown/.test(m)).length, 1, inspect(alerts));
    assert.equal(api.posts.length, 1);
  }));

test('an operator resend that loses its claim to the first attempt\'s late "done" closes the incident, not leaves it with nothing to decide', () =>
  withApi(async (api) => {
    const key = 'edges/review-resend-loses-claim:push';
    await recordHttp(api, key);
    const { first, answer } = await attemptOutlivedItsLease(key);
    await raiseUnknown(key);
    // The resend reads "unknown, resend decided"; attempt 1's "done" commits before the resend's
    // claim (the second UPDATE of the operator's process, after the decision's).
    let updates = 0;
    const delayed = <T extends object>(target: T, before: () => Promise<void>): T =>
      new Proxy(target, {
        get(obj, prop, receiver) {
          const value = Reflect.get(obj, prop, receiver) as unknown;
          if (typeof value !== 'function') return value;
          if (prop === 'executeTakeFirst')
            return async (...args: unknown[]) => {
              await before();
              return (value as (...a: unknown[]) => unknown).apply(obj, args);
            };
          return (...args: unknown[]) => {
            const out = (value as (...a: unknown[]) => unknown).apply(obj, args);
            return typeof out === 'object' && out !== null ? delayed(out, before) : out;
          };
        },
      });
    const base = depsAt();
    const db = new Proxy(base.db, {
      get(obj, prop, receiver) {
        const value = Reflect.get(obj, prop, receiver) as unknown;
        if (prop === 'updateTable' && typeof value === 'function')
          return (...args: unknown[]) => {
            const builder = (value as (...a: unknown[]) => object).apply(obj, args);
            return ++updates === 2
              ? delayed(builder, async () => {
                  answer();
                  await first;
                })
              : builder;
          };
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(obj) : value;
      },
    });
    const r = await settled(decideUnknownEffect({ ...base, db }, key, 'resend', 'alice'));
    assert.equal((await first).outcome, 'done');
    assert.equal(api.posts.length, 1, 'one provider call');
    assert.equal((await effectRow(t.db, key)).status, 'done');
    const open = await t.db
      .selectFrom('incidents')
      .select('id')
      .where('subject', '=', key)
      .where('closed_at', 'is', null)
      .execute();
    assert.deepEqual(open, [], `the incident closes: ${inspect(r)}`);
  }));

test('an effect whose attempt died (an operator\'s resend killed mid-send) is unknown to the next decision, not stuck "begun"', async () => {
  const key = 'edges/review-killed-resend:post';
  await recordSlack(key, 'post', 'killed');
  // The resend claimed it, then its process was killed: begun, and its lease has passed. No
  // workflow drives the effect any more.
  await leaveAs(key, 'begun', { lease_until: new Date(Date.now() - 60_000) });
  const before = chat.requests.length;
  const r = await decideUnknownEffect(depsAt(), key, 'skip', 'alice');
  assert.equal(r.outcome, 'skipped');
  assert.equal((await effectRow(t.db, key)).status, 'skipped');
  assert.equal(chat.requests.length, before, 'nothing sent');
  // One whose lease has not passed is still being performed: not decidable yet.
  const live = 'edges/review-live-resend:post';
  await recordSlack(live, 'post', 'live');
  await leaveAs(live, 'begun', { lease_until: new Date(Date.now() + 60_000) });
  await assert.rejects(decideUnknownEffect(depsAt(), live, 'skip', 'alice'), /being performed|not unknown/);
  assert.equal((await effectRow(t.db, live)).status, 'begun');
});

test('a send known to have happened twice is recorded as a finding whose alert the caller delivers', () =>
  withApi(async (api) => {
    const key = 'edges/review-known-twice:push';
    await recordHttp(api, key, { statusUrl: true });
    api.state.statusLags = true;
    const { first, answer } = await attemptAwaitingAnswer(key);
    await expireLease(key);
    const alertsSince = watchAlerts();
    // Another worker finds the lease passed, asks the status URL (it lags: 404) and sends again.
    const second = await perform(key);
    assert.equal(second.outcome, 'done');
    assert.equal(second.alerts, undefined, 'the attempt that sent second found nothing twice');
    answer();
    const late = await first;
    assert.equal(late.outcome, 'done');
    assert.equal(api.posts.length, 2, 'the target received it twice');
    // The finding is recorded, and its alert handed back: the effect activity sends no alert itself.
    const incident = await t.db
      .selectFrom('incidents')
      .select(['kind', 'last_error'])
      .where('subject', '=', `${key}:sent-twice`)
      .executeTakeFirstOrThrow();
    assert.equal(incident.kind, 'finding');
    assert.match(incident.last_error, /performed twice/);
    assert.deepEqual(alertsSince(), [], 'no alert sent from inside the effect activity');
    assert.equal(late.alerts?.length, 1, inspect(late));
    // The caller (a workflow, or deliverNow in a process) delivers it like every other alert.
    for (const delivery of late.alerts!) assert.equal((await perform(delivery)).outcome, 'done');
    const alerts = alertsSince();
    assert.equal(alerts.filter((m) => m.includes(key) && /twice/.test(m)).length, 1, inspect(alerts));
  }));

test('lease on the database clock: a worker whose clock runs 5 minutes ahead finds a live begun effect and does not send', () =>
  withApi(async (api) => {
    const key = 'edges/lease-fast-clock:push';
    await recordHttp(api, key, { policy: 'resend' });
    const { first, answer } = await attemptAwaitingAnswer(key);
    assert.equal(api.posts.length, 1, 'attempt 1 sent and has not answered yet');
    // To this worker's clock the lease passed minutes ago; to the database's it is live.
    const fast = await settled(perform(key, depsAt(5 * 60_000)));
    assert.ok(
      fast instanceof ApplicationFailure && fast.type === 'EffectInProgress',
      `a live lease is in progress whatever the worker's clock says: ${inspect(fast)}`,
    );
    assert.ok(
      (fast.nextRetryDelay as number) > 50_000,
      `it waits out the lease by the database clock: ${inspect(fast.nextRetryDelay)}`,
    );
    answer();
    assert.equal((await first).outcome, 'done');
    assert.equal(api.posts.length, 1, 'exactly one provider call');
    assert.equal((await effectRow(t.db, key)).status, 'done');
  }));

test("lease deadline: a provider call that would outlive the attempt's lease is cut short inside it", () =>
  withApi(async (api) => {
    const key = 'edges/lease-deadline:push';
    await recordHttp(api, key, { policy: 'resend' });
    // The target answers after 10 s, the provider's own timeout is its default 15 s, and the
    // attempt (and so its lease) has 3 s: the call must end before the lease does.
    api.state.hang = true;
    api.state.hangMs = 10_000;
    const deps = depsAt(0, { channels: { ...depsAt().channels, http: httpApiProvider() } });
    const env = new MockActivityEnvironment({ startToCloseTimeoutMs: 3_000 });
    const started = Date.now();
    const r = await settled(env.run(effectActivities(deps).performEffect, { key }));
    const tookMs = Date.now() - started;
    assert.equal(api.posts.length, 1);
    assert.ok(tookMs < 3_000, `the call ended inside the 3 s lease, after ${tookMs} ms: ${inspect(r)}`);
    const row = await effectRow(t.db, key);
    assert.equal(row.status, 'unknown', 'cut short after sending: maybe sent, never "failed"');
    const live = await sql<{ live: boolean }>`
      select (lease_until is not null and lease_until > now()) as live from ${tm.effects} where effect_key = ${key}`.execute(
      t.db,
    );
    assert.equal(live.rows[0]!.live, false, 'no lease is left behind');
  }));
