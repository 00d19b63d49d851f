// Payload encryption and the codec server, on a real Temporal dev server, PostgreSQL and the page's
// real HTTP server. Windows run by workers and clients with the AES-256-GCM codec leave no business
// data in their histories (read without the codec); the page's /codec/decode gives it back to the
// Web UI's origin with the login cookie (CORS checked), and to nobody else; key rotation keeps old
// histories readable; turning encryption on keeps running workflows running. And what the codec
// leaves behind: schedules' stored args after a rotation, a keyless process meeting an encrypted
// payload, every history of a tick and a batched backfill, the codec server's edges, the temporal CLI.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { memoryLogger } from '../../../activities/logger.js';
import { temporalDataConverter, AesGcmCodec, payloadKeysFrom } from '../../../codec/index.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { type Catalog } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { RerunState, WindowRunResult } from '../../../contract/workflows.js';
import { bundleWorkflows, createWorker } from '../../../workers/create-worker.js';
import { syncSchedules } from '../../../workers/schedule-sync.js';
import { scheduleIdOf, WATCH_SCHEDULE_ID } from '../../../contract/schedule-ids.js';
import { allText, payloadsIn } from '../../helpers/history.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { eventually, realStack, sharedBundle, uniqueQueue, windowPolicy } from '../../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../../helpers/web.js';

const stack = realStack(undefined, { own: true });
const k1 = `k1:${randomBytes(32).toString('base64')}`;
const k2 = `k2:${randomBytes(32).toString('base64')}`;
const WEB_UI = 'http://127.0.0.1:8233';
const CUSTOMER = 'ACME-ZEBRA-7731';
const AMOUNT = '98765.43';
const ORDER_PREFIX = 'ZEBRA-ORDER';
const BUSINESS = [CUSTOMER, AMOUNT, ORDER_PREFIX];

let encryptedBundle: WorkflowBundleWithSourceMap;
before(async () => {
  encryptedBundle = await bundleWorkflows({ encryptFailures: true });
});

/** A client whose payloads go through the codec of `keys` (none: plain, as before issue 13). */
const clientWith = (keys: string | null) => {
  const dataConverter = keys ? temporalDataConverter({ TIDEMARK_PAYLOAD_KEYS: keys }) : undefined;
  return new Client({
    connection: stack.env.connection,
    namespace: stack.env.namespace ?? 'default',
    ...(dataConverter ? { dataConverter } : {}),
  });
};

/** Runs `fn` with a worker on `taskQueue` whose codec has `keys` (null: no codec, the plain bundle). */
async function withCodecWorker<T>(
  taskQueue: string,
  catalog: Catalog,
  keys: string | null,
  fn: () => Promise<T>,
): Promise<T> {
  const dataConverter = keys ? temporalDataConverter({ TIDEMARK_PAYLOAD_KEYS: keys }) : undefined;
  const worker = await createWorker({
    connection: stack.env.nativeConnection,
    namespace: stack.env.namespace ?? 'default',
    taskQueue,
    deps: { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    bundle: keys ? encryptedBundle : await sharedBundle(),
    shutdownGraceTime: '1s',
    ...(dataConverter ? { dataConverter } : {}),
  });
  const running = worker.run();
  try {
    return await fn();
  } finally {
    worker.shutdown();
    await running;
  }
}

type History = Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>;

/**
 * The payloads of a history's events, but for what the SDK core writes itself, past any codec: a
 * patch marker's details (a patch id such as "window-local-activity") and a local activity marker's
 * `data` (activity id, type, attempt, times). The local activity's result is encrypted like the rest.
 */
const historyPayloads = (history: History): Payload[] =>
  (history.events ?? []).flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    if (marker?.markerName === 'core_patch') return [];
    if (marker?.markerName === 'core_local_activity')
      return Object.entries(marker.details ?? {}).flatMap(([k, v]) => (k === 'data' ? [] : payloadsIn(v)));
    return payloadsIn(e);
  });

/** The options of a manual run of `job`'s window `W` on `taskQueue`, with up to `attempts` attempts. */
const windowInput = (
  taskQueue: string,
  job: string,
  W: { start: string; end: string },
  attempts: number,
) => ({
  taskQueue,
  workflowId: `${job}/${W.start}`,
  args: [
    {
      job,
      ...W,
      generation: 0,
      key: `${job}/${W.start}`,
      trigger: 'manual',
      policy: windowPolicy(attempts, 30_000),
    },
  ],
});

const meta = (p: Payload, key: string) => {
  const b = p.metadata?.[key];
  return b ? Buffer.from(b).toString('utf8') : undefined;
};

/** The raw history of `workflowId`, read by a client without any codec. */
const rawHistory = (workflowId: string): Promise<History> =>
  clientWith(null).workflow.getHandle(workflowId).fetchHistory();

const toJson = (payloads: Payload[]) => ({
  payloads: payloads.map((p) => ({
    metadata: Object.fromEntries(
      Object.entries(p.metadata ?? {}).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
    ),
    data: Buffer.from(p.data ?? new Uint8Array()).toString('base64'),
  })),
});
const fromJson = (body: { payloads: { metadata: Record<string, string>; data: string }[] }): Payload[] =>
  body.payloads.map((p) => ({
    metadata: Object.fromEntries(
      Object.entries(p.metadata).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]),
    ),
    data: new Uint8Array(Buffer.from(p.data, 'base64')),
  }));

/** The messages of an error and its causes. */
const messages = (err: unknown): string => {
  const out: string[] = [];
  for (let e = err as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
    out.push(e.message ?? '');
  return out.join(' <- ');
};

test('encrypted windows: no business data in the history; the Web UI decodes it through the page', async () => {
  const W = { start: '2026-04-01T10:00:00Z', end: '2026-04-01T11:00:00Z' };
  const catalog = defineCatalog([
    salesJob('enc-ok', {
      start: W.start,
      lateness: '0m',
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        findings: [{ subject: `customer ${CUSTOMER}`, message: `refund ${AMOUNT} owed to ${CUSTOMER}` }],
      }),
    }),
    salesJob('enc-fail', {
      start: W.start,
      lateness: '0m',
      handler: async () => {
        throw new Error(`refund ${AMOUNT} to ${CUSTOMER} refused by the bank`);
      },
    }),
  ]);
  await insertOrders(stack.t.db, ordersBetween(ORDER_PREFIX, W.start, W.end, 7));
  const taskQueue = uniqueQueue('enc');
  const client = clientWith(k1);
  const input = (job: string) => windowInput(taskQueue, job, W, 1);
  let failure: unknown;
  const result = await withCodecWorker(taskQueue, catalog, k1, async () => {
    failure = await client.workflow.execute('window', input('enc-fail')).catch((e: unknown) => e);
    return (await client.workflow.execute('window', input('enc-ok'))) as WindowRunResult;
  });
  // The codec's client reads everything back.
  assert.equal(result.outcome, 'processed');
  assert.equal(result.counts?.input, 7);
  assert.match(JSON.stringify(result), new RegExp(`refund ${AMOUNT} owed to ${CUSTOMER}`));
  assert.ok(failure instanceof WorkflowFailedError, String(failure));
  assert.match(messages(failure), new RegExp(`refund ${AMOUNT} to ${CUSTOMER} refused by the bank`));

  // Without the codec: no business value anywhere in either history, every payload encrypted with k1.
  const histories = await Promise.all(['enc-ok', 'enc-fail'].map((job) => rawHistory(`${job}/${W.start}`)));
  for (const [i, history] of histories.entries()) {
    const text = allText(history);
    for (const value of BUSINESS) assert.ok(!text.includes(value), `history ${i} holds ${value} in clear`);
    const payloads = historyPayloads(history);
    assert.ok(payloads.length >= 3, `history ${i} has payloads`);
    for (const p of payloads) {
      assert.equal(meta(p, 'encoding'), 'binary/encrypted', Buffer.from(p.data!).toString().slice(0, 200));
      assert.equal(meta(p, 'encryption-key-id'), 'k1');
    }
  }
  // The failures (the local activity's in its marker, the workflow's) say only "Encoded failure".
  const failures: { message?: string | null; stackTrace?: string | null; cause?: unknown }[] = [];
  const collect = (v: unknown) => {
    if (!v || typeof v !== 'object' || v instanceof Uint8Array) return;
    for (const [k, x] of Object.entries(v)) {
      if ((k === 'failure' || k === 'cause') && x && typeof x === 'object') failures.push(x as never);
      collect(x);
    }
  };
  collect(histories[1]!.events);
  assert.ok(failures.length >= 2, `failures: ${failures.length}`);
  for (const f of failures) {
    assert.equal(f.message, 'Encoded failure');
    assert.equal(f.stackTrace ?? '', '');
  }
  // A client without the codec gets no value either.
  await assert.rejects(
    clientWith(null).workflow.getHandle(`enc-ok/${W.start}`).result(),
    /binary\/encrypted/,
  );

  // The page's codec server.
  const token = 'codec-page-token-0123';
  const codecToken = 'codec-only-token-0123456789';
  const web = await startWeb(stack, {
    token,
    catalog,
    env: { TIDEMARK_PAYLOAD_KEYS: k1, TIDEMARK_CODEC_TOKEN: codecToken, TIDEMARK_WEB_UI_URL: WEB_UI },
  });
  try {
    const cookie = sessionCookie(await postLogin(web.url, token));
    const body = JSON.stringify(toJson(histories.flatMap((h) => historyPayloads(h))));
    const post = (headers: Record<string, string>, path = '/codec/decode', data = body) =>
      fetch(`${web.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-namespace': 'default', ...headers },
        body: data,
      });

    // The browser's preflight (no credentials), then the call with the cookie, from the Web UI.
    const preflight = await fetch(`${web.url}/codec/decode`, {
      method: 'OPTIONS',
      headers: {
        origin: WEB_UI,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,x-namespace',
      },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), WEB_UI);
    assert.equal(preflight.headers.get('access-control-allow-credentials'), 'true');
    assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /POST/);
    for (const h of ['content-type', 'x-namespace', 'authorization'])
      assert.match(preflight.headers.get('access-control-allow-headers') ?? '', new RegExp(h));

    const decoded = await post({ origin: WEB_UI, cookie });
    assert.equal(decoded.status, 200, await decoded.clone().text());
    assert.equal(decoded.headers.get('access-control-allow-origin'), WEB_UI);
    assert.equal(decoded.headers.get('access-control-allow-credentials'), 'true');
    const plain = fromJson((await decoded.json()) as Parameters<typeof fromJson>[0]);
    assert.ok(plain.every((p) => meta(p, 'encoding') !== 'binary/encrypted'));
    const values = JSON.stringify(plain.map((p) => defaultPayloadConverter.fromPayload(p)));
    assert.ok(values.includes(`refund ${AMOUNT} owed to ${CUSTOMER}`), 'the finding, decoded');
    assert.ok(values.includes(`refund ${AMOUNT} to ${CUSTOMER} refused by the bank`), 'the failure, decoded');
    assert.ok(values.includes('"job":"enc-ok"'), 'the window input, decoded');

    // Encode round trip for the Web UI's own inputs (a signal from the UI): k1 payloads.
    const enc = await post(
      { origin: WEB_UI, cookie },
      '/codec/encode',
      JSON.stringify(toJson([defaultPayloadConverter.toPayload({ a: CUSTOMER })])),
    );
    assert.equal(enc.status, 200);
    const [encrypted] = fromJson((await enc.json()) as Parameters<typeof fromJson>[0]);
    assert.equal(meta(encrypted!, 'encryption-key-id'), 'k1');
    assert.ok(!Buffer.from(encrypted!.data!).toString('latin1').includes(CUSTOMER));

    // The CLI's way: the codec-only token (and the page's token) as a bearer, no Origin.
    assert.equal((await post({ authorization: `Bearer ${codecToken}` })).status, 200);
    assert.equal((await post({ authorization: `Bearer ${token}` })).status, 200);
    // The codec-only token opens nothing else.
    assert.equal(
      (await fetch(`${web.url}/api/state`, { headers: { authorization: `Bearer ${codecToken}` } })).status,
      401,
    );

    // Refused: no login, a wrong token, another origin (even with the cookie); never a payload.
    const refusals: [Record<string, string>, number][] = [
      [{ origin: WEB_UI }, 401],
      [{}, 401],
      [{ authorization: 'Bearer wrong-token-0123456789' }, 401],
      [{ origin: 'http://evil.example', cookie }, 403],
      [{ origin: 'http://127.0.0.1:9999', authorization: `Bearer ${codecToken}` }, 403],
    ];
    for (const [headers, status] of refusals) {
      const res = await post(headers);
      const text = await res.text();
      assert.equal(res.status, status, `${JSON.stringify(Object.keys(headers))}: ${text}`);
      for (const value of BUSINESS) assert.ok(!text.includes(value));
      assert.ok(!text.includes('payloads":'), text);
      assert.equal(res.headers.get('access-control-allow-origin') === 'http://evil.example', false);
    }
    const evilPreflight = await fetch(`${web.url}/codec/decode`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    assert.equal(evilPreflight.status, 403);
    assert.equal(evilPreflight.headers.get('access-control-allow-origin'), null);
    // Another namespace's payloads are not this deployment's.
    assert.equal((await post({ cookie, 'x-namespace': 'other' })).status, 400);
    // Bad input is a 400 naming the field; a body past the limit is a 413.
    const bad = await post({ cookie }, '/codec/decode', JSON.stringify({ payloads: [{ data: '***' }] }));
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /payloads\[0\]\.data: must be a base64 string/);
    const big = await post(
      { cookie },
      '/codec/decode',
      JSON.stringify({ payloads: [{ data: 'A'.repeat(5 * 1024 * 1024) }] }),
    );
    assert.equal(big.status, 413);
    // The page's own rules stand for every other route: the Web UI's origin may not post to /api.
    const api = await fetch(`${web.url}/api/jobs/enc-ok/pause`, {
      method: 'POST',
      headers: { origin: WEB_UI, cookie, 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(api.status, 403);
    assert.equal(api.headers.get('access-control-allow-origin'), null);
  } finally {
    await web.stop();
  }

  // Without payload keys the codec server is a clear 404 (after the login check).
  const plainWeb = await startWeb(stack, {
    token,
    catalog,
    env: { TIDEMARK_PAYLOAD_KEYS: '', TIDEMARK_WEB_UI_URL: WEB_UI },
  });
  try {
    const res = await fetch(`${plainWeb.url}/codec/decode`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"payloads":[]}',
    });
    assert.equal(res.status, 404);
    assert.match(await res.text(), /payload encryption is not configured \(TIDEMARK_PAYLOAD_KEYS is unset\)/);
  } finally {
    await plainWeb.stop();
  }
});

test('turning encryption on and rotating keys: running and finished workflows stay readable', async () => {
  const job = 'rot';
  const W0 = { start: '2026-05-01T10:00:00Z', end: '2026-05-01T11:00:00Z' };
  const W1 = { start: '2026-05-01T11:00:00Z', end: '2026-05-01T12:00:00Z' };
  const W2 = { start: '2026-05-01T12:00:00Z', end: '2026-05-01T13:00:00Z' };
  const catalog = defineCatalog([salesJob(job, { start: W0.start, lateness: '0m' })]);
  await insertOrders(stack.t.db, ordersBetween(`${ORDER_PREFIX}-rot`, W0.start, W2.end, 30));
  const taskQueue = uniqueQueue(job);
  const windowRun = (client: Client, W: typeof W0) =>
    client.workflow.execute('window', windowInput(taskQueue, job, W, 2)) as Promise<WindowRunResult>;
  const rerunId = `${job}/${W0.start}/rerun-1`;
  const waitForRequest = (client: Client) =>
    eventually(
      async () => {
        const s = await client.workflow.getHandle(rerunId).query<RerunState>('state');
        return s.request && !s.previewing ? s : undefined;
      },
      60_000,
      'the rerun request',
    );

  // Before encryption: a window done and a rerun request waiting for its decision, all in clear.
  await withCodecWorker(taskQueue, catalog, null, async () => {
    const plain = clientWith(null);
    assert.equal((await windowRun(plain, W0)).outcome, 'processed');
    await plain.workflow.start('rerun', {
      taskQueue,
      workflowId: rerunId,
      args: [
        {
          job,
          windowStart: W0.start,
          reason: 'late orders',
          requestedBy: 'alice',
          approvers: ['bob'],
          timeoutMs: 600_000,
        },
      ],
    });
    await waitForRequest(plain);
  });
  assert.ok(payloadsIn(await rawHistory(rerunId)).every((p) => meta(p, 'encoding') === 'json/plain'));

  // Encryption on with k1: the running rerun is still queried (a new worker replays its plain
  // history); a new window is written with k1.
  await withCodecWorker(taskQueue, catalog, k1, async () => {
    const c1 = clientWith(k1);
    assert.equal((await waitForRequest(c1)).status, 'pending');
    assert.equal((await windowRun(c1, W1)).outcome, 'processed');
  });
  const w1Payloads = historyPayloads(await rawHistory(`${job}/${W1.start}`));
  assert.ok(w1Payloads.length > 0);
  for (const p of w1Payloads)
    assert.equal(meta(p, 'encryption-key-id'), 'k1', Buffer.from(p.data!).toString().slice(0, 200));

  // Rotation: k2 first, k1 kept. Old histories read (result, describe, query), the rerun decided and
  // finished, and everything new carries k2.
  await withCodecWorker(taskQueue, catalog, `${k2},${k1}`, async () => {
    const c21 = clientWith(`${k2},${k1}`);
    const w1 = c21.workflow.getHandle(`${job}/${W1.start}`);
    assert.equal(((await w1.result()) as WindowRunResult).outcome, 'processed');
    assert.equal((await w1.describe()).status.name, 'COMPLETED');
    assert.equal(
      ((await c21.workflow.getHandle(`${job}/${W0.start}`).result()) as WindowRunResult).outcome,
      'processed',
    );
    const rerun = c21.workflow.getHandle(rerunId);
    assert.equal((await waitForRequest(c21)).status, 'pending');
    await rerun.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'web' }] });
    assert.equal(((await rerun.result()) as { outcome: string }).outcome, 'done');
    assert.equal((await windowRun(c21, W2)).outcome, 'processed');
  });
  const w2Payloads = historyPayloads(await rawHistory(`${job}/${W2.start}`));
  assert.ok(w2Payloads.length > 0);
  for (const p of w2Payloads)
    assert.equal(meta(p, 'encryption-key-id'), 'k2', Buffer.from(p.data!).toString().slice(0, 200));
  // The rerun's history: its start in clear (written before), what came after the rotation in k2.
  const rerunIds = new Set(
    historyPayloads(await rawHistory(rerunId)).map((p) => meta(p, 'encryption-key-id') ?? 'plain'),
  );
  assert.ok(rerunIds.has('plain') && rerunIds.has('k2'), [...rerunIds].join(','));
  for (const value of [CUSTOMER, AMOUNT])
    assert.ok(!allText(await rawHistory(`${job}/${W2.start}`)).includes(value));

  // A client with k2 only cannot read k1's history: a clear error naming the key id, not a key.
  const err = await clientWith(k2)
    .workflow.getHandle(`${job}/${W1.start}`)
    .result()
    .catch((e: unknown) => e as Error);
  assert.ok(err instanceof Error);
  assert.match(err.message, /key id "k1", which is not configured: add that key .* to TIDEMARK_PAYLOAD_KEYS/);
  for (const k of [k1, k2]) assert.ok(!err.message.includes(k.slice(3)));
});

// What the codec leaves behind that a key rotation or a keyless process trips over, on a Temporal dev
// server and database of their own.
describe('what the codec leaves behind for a key rotation or a keyless process', () => {
  const stack = realStack(undefined, { own: true });
  const k1 = `k1:${randomBytes(32).toString('base64')}`;
  const k2 = `k2:${randomBytes(32).toString('base64')}`;

  const clientWith = (keys: string | null) => {
    const dataConverter = keys ? temporalDataConverter({ TIDEMARK_PAYLOAD_KEYS: keys }) : undefined;
    return new Client({
      connection: stack.env.connection,
      namespace: stack.env.namespace ?? 'default',
      ...(dataConverter ? { dataConverter } : {}),
    });
  };

  /** The key id (or "plain") of every payload the server stores in a schedule's action: args and memo. */
  async function scheduleKeyIds(scheduleId: string): Promise<string[]> {
    const raw = await stack.env.connection.workflowService.describeSchedule({
      namespace: stack.env.namespace ?? 'default',
      scheduleId,
    });
    const start = raw.schedule?.action?.startWorkflow;
    const payloads = [
      ...(start?.input?.payloads ?? []),
      ...Object.values(start?.memo?.fields ?? {}),
      // The schedule's own memo (read by every describe and list).
      ...Object.values(raw.memo?.fields ?? {}),
    ];
    assert.ok(payloads.length >= 2, `${scheduleId}: the action has args and a memo`);
    return payloads.map((p) => {
      const id = p.metadata?.['encryption-key-id'];
      return id ? Buffer.from(id).toString('utf8') : 'plain';
    });
  }

  test("schedule sync re-encrypts the schedules' stored action args when encryption is turned on or the key rotates", async () => {
    // A schedule's action args and memo are stored once, encrypted when sync wrote them, and copied into
    // every tick it starts. Left with the old key after a rotation, they break every tick the day the
    // old key is dropped (and a schedule made before encryption starts ticks with plain input forever).
    const catalog = defineCatalog([salesJob('rot-sched', { grid: '1h', lateness: '5m' })]);
    const taskQueue = 'rot-sched-q';
    const ids = [scheduleIdOf('rot-sched'), WATCH_SCHEDULE_ID];

    await syncSchedules(clientWith(null), catalog, { taskQueue, apply: true });
    for (const id of ids) assert.deepEqual([...new Set(await scheduleKeyIds(id))], ['plain'], id);
    // A job whose schedule was made with k1 in the first place (its schedule memo too).
    const fromK1 = defineCatalog([...catalog.jobs, salesJob('rot-k1', { grid: '1h', lateness: '5m' })]);
    await syncSchedules(clientWith(k1), fromK1, { taskQueue, apply: true });
    ids.push(scheduleIdOf('rot-k1'));

    // Encryption turned on: sync (re)writes the schedules with k1.
    const on = await syncSchedules(clientWith(k1), fromK1, { taskQueue, apply: true });
    assert.deepEqual(on.failed, []);
    for (const id of ids) assert.deepEqual([...new Set(await scheduleKeyIds(id))], ['k1'], id);

    // An operator paused one; the rotation keeps the pause and its note.
    await clientWith(k1).schedule.getHandle(scheduleIdOf('rot-k1')).pause('held by ops');
    // Rotation: k2 first, k1 kept: sync rewrites them with k2, so that k1 can be dropped.
    const rotated = await syncSchedules(clientWith(`${k2},${k1}`), fromK1, { taskQueue, apply: true });
    assert.deepEqual(rotated.failed, []);
    assert.deepEqual(rotated.update.sort(), [...ids].sort());
    for (const id of ids) assert.deepEqual([...new Set(await scheduleKeyIds(id))], ['k2'], id);

    const held = await clientWith(`${k2},${k1}`).schedule.getHandle(scheduleIdOf('rot-k1')).describe();
    assert.deepEqual([held.state.paused, held.state.note], [true, 'held by ops']);
    // Then a sync with k2 alone finds nothing to change, and the schedule reads fine with k2 only.
    const after = await syncSchedules(clientWith(k2), fromK1, { taskQueue, apply: true });
    assert.deepEqual([after.failed, after.update, after.create], [[], [], []]);
    for (const job of ['rot-sched', 'rot-k1']) {
      const described = await clientWith(k2).schedule.getHandle(scheduleIdOf(job)).describe();
      assert.deepEqual(described.action.type === 'startWorkflow' && described.action.args, [{ job }], job);
      assert.deepEqual(described.memo, { job }, job);
    }
    for await (const s of clientWith(k2).schedule.list()) assert.ok(s.scheduleId);
  });

  test('a process without payload keys that meets an encrypted payload says which key id and which setting', async () => {
    const catalog = defineCatalog([salesJob('keyless', { grid: '1h', lateness: '5m' })]);
    await syncSchedules(clientWith(k1), catalog, { taskQueue: 'keyless-q', apply: true });
    // The CLI, page or a worker started without TIDEMARK_PAYLOAD_KEYS: the data converter of its env.
    const keylessConverter = temporalDataConverter({});
    const keyless = new Client({
      connection: stack.env.connection,
      namespace: stack.env.namespace ?? 'default',
      ...(keylessConverter ? { dataConverter: keylessConverter } : {}),
    });
    const err = await keyless.schedule
      .getHandle(scheduleIdOf('keyless'))
      .describe()
      .then(
        () => assert.fail('a keyless client decoded an encrypted payload'),
        (e: unknown) => e as Error,
      );
    assert.match(err.message, /key id "k1"/);
    assert.match(err.message, /TIDEMARK_PAYLOAD_KEYS/);
    assert.ok(!err.message.includes(k1.slice(3)));
  });

  test('tick, its child windows, a batched backfill that continues as new, failures: every history encrypted', async () => {
    const SECRET = 'ACME-OTTER-5521';
    const W = { start: '2026-06-01T00:00:00Z', end: '2026-06-01T06:00:00Z' };
    const catalog = defineCatalog([
      salesJob('leak-ok', {
        start: W.start,
        lateness: '0m',
        handler: async (ctx) => ({
          ...(await summariseWindow(ctx)),
          findings: [{ subject: `customer ${SECRET}`, message: `owed to ${SECRET}` }],
        }),
      }),
      salesJob('leak-fail', {
        start: W.start,
        lateness: '0m',
        retry: { maximumAttempts: 1 },
        handler: async () => {
          throw new Error(`bank refused ${SECRET}`);
        },
      }),
    ]);
    await insertOrders(stack.t.db, ordersBetween(`${SECRET}-o`, W.start, W.end, 12));
    const taskQueue = uniqueQueue('leak');
    const client = clientWith(k1);
    const bundle = await bundleWorkflows({ encryptFailures: true });
    const worker = await createWorker({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace ?? 'default',
      taskQueue,
      deps: { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
      bundle,
      shutdownGraceTime: '1s',
      dataConverter: temporalDataConverter({ TIDEMARK_PAYLOAD_KEYS: k1 }),
    });
    const running = worker.run();
    const ids: string[] = [];
    try {
      for (const job of ['leak-ok', 'leak-fail']) {
        const id = `${job}/tick-probe`;
        ids.push(id);
        await client.workflow
          .execute('tick', { taskQueue, workflowId: id, args: [{ job, now: '2026-06-01T02:00:00Z' }] })
          .catch(() => undefined);
        const bf = `${job}/backfill-probe`;
        ids.push(bf);
        await client.workflow
          .execute('backfill', {
            taskQueue,
            workflowId: bf,
            args: [{ job, from: W.start, to: W.end, pageSize: 2, batch: 2, concurrency: 1 }],
          })
          .catch(() => undefined);
      }
    } finally {
      worker.shutdown();
      await running;
    }
    // Every run of every workflow of the task queue (children and continued-as-new runs included).
    const raw = stack.env.client;
    const runs = await eventually(
      async () => {
        const found: { workflowId: string; runId: string }[] = [];
        for await (const w of raw.workflow.list({ query: `TaskQueue = '${taskQueue}'` }))
          found.push({ workflowId: w.workflowId, runId: w.runId });
        return found.length >= 6 ? found : undefined;
      },
      60_000,
      'the runs listed',
    );
    const leaks: string[] = [];
    for (const { workflowId, runId } of runs) {
      const history = await raw.workflow.getHandle(workflowId, runId).fetchHistory();
      if (allText(history).includes(SECRET)) {
        const where = (history.events ?? []).filter((e) => allText(e).includes(SECRET));
        leaks.push(
          `${workflowId}: ${where.map((e) => Object.keys(e).find((k) => k.endsWith('Attributes'))).join(',')}`,
        );
      }
      for (const p of payloadsIn(history.events, { skipCoreMarkers: true })) {
        const enc = p.metadata?.encoding ? Buffer.from(p.metadata.encoding).toString() : '?';
        if (enc !== 'binary/encrypted')
          leaks.push(
            `${workflowId}: a ${enc} payload: ${Buffer.from(p.data ?? [])
              .toString()
              .slice(0, 120)}`,
          );
      }
    }
    assert.deepEqual(leaks, [], `runs checked: ${runs.map((r) => r.workflowId).join(', ')}`);
  });

  test('codec server: expired session, Origin null, a same-site page on another port with a simple request, no wildcard', async () => {
    const token = 'codec-review-token-0123';
    let clock = new Date('2026-07-01T00:00:00Z');
    const web = await startWeb(stack, {
      token,
      catalog: defineCatalog([salesJob('cs', {})]),
      env: {
        TIDEMARK_PAYLOAD_KEYS: k1,
        TIDEMARK_WEB_UI_URL: 'http://127.0.0.1:8233',
        TIDEMARK_WEB_SESSION_TTL: '1h',
      },
      now: () => clock,
    });
    try {
      const cookie = sessionCookie(await postLogin(web.url, token));
      const [enc] = await new AesGcmCodec(payloadKeysFrom({ TIDEMARK_PAYLOAD_KEYS: k1 })!).encode([
        defaultPayloadConverter.toPayload('ACME-SEAL-0042'),
      ]);
      const body = JSON.stringify({
        payloads: [
          {
            metadata: Object.fromEntries(
              Object.entries(enc!.metadata!).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
            ),
            data: Buffer.from(enc!.data!).toString('base64'),
          },
        ],
      });
      const post = (headers: Record<string, string>) =>
        fetch(`${web.url}/codec/decode`, { method: 'POST', headers, body });
      const ok = await post({ origin: 'http://127.0.0.1:8233', cookie, 'content-type': 'application/json' });
      assert.equal(ok.status, 200);
      assert.ok((await ok.text()).includes(Buffer.from('"ACME-SEAL-0042"').toString('base64')));
      assert.equal(ok.headers.get('access-control-allow-origin'), 'http://127.0.0.1:8233');
      assert.match(ok.headers.get('vary') ?? '', /origin/i);

      const refused: [string, Record<string, string>, number][] = [
        ['Origin null with the cookie', { origin: 'null', cookie, 'content-type': 'text/plain' }, 403],
        [
          'a page on another port of the same host, simple content type, the cookie',
          { origin: 'http://127.0.0.1:9', cookie, 'content-type': 'text/plain' },
          403,
        ],
        ['the Web UI origin without a login', { origin: 'http://127.0.0.1:8233' }, 401],
      ];
      for (const [what, headers, status] of refused) {
        const res = await post(headers);
        const text = await res.text();
        assert.equal(res.status, status, `${what}: ${text}`);
        assert.ok(!text.includes('payloads'), what);
        assert.notEqual(res.headers.get('access-control-allow-origin'), '*', what);
        if (status === 403) assert.equal(res.headers.get('access-control-allow-origin'), null, what);
      }
      // The session expires: the cookie no longer opens the codec server.
      clock = new Date(clock.getTime() + 2 * 3_600_000);
      const expired = await post({
        origin: 'http://127.0.0.1:8233',
        cookie,
        'content-type': 'application/json',
      });
      assert.equal(expired.status, 401, await expired.text());
    } finally {
      await web.stop();
    }
  });

  test('the real temporal CLI reads an encrypted history through the page with the codec-only token', async () => {
    const token = 'codec-cli-page-token-0123';
    const codecToken = 'codec-cli-only-token-0123456789';
    const web = await startWeb(stack, {
      token,
      catalog: defineCatalog([salesJob('cli', {})]),
      env: { TIDEMARK_PAYLOAD_KEYS: k1, TIDEMARK_CODEC_TOKEN: codecToken },
    });
    try {
      const workflowId = `cli-codec-${randomBytes(4).toString('hex')}`;
      await clientWith(k1).workflow.start('window', {
        taskQueue: 'nobody-polls-this',
        workflowId,
        args: [{ customer: 'ACME-HERON-3310' }],
      });
      const show = (auth: string) =>
        new Promise<{ code: number | null; out: string }>((resolve) => {
          const child = spawn(
            '.venv/bin/temporal',
            [
              'workflow',
              'show',
              '-w',
              workflowId,
              '--address',
              stack.env.address,
              '--namespace',
              stack.env.namespace ?? 'default',
              '--codec-endpoint',
              `${web.url}/codec`,
              '--codec-auth',
              auth,
              '-o',
              'json',
            ],
            { env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' } },
          );
          let out = '';
          child.stdout.on('data', (d: Buffer) => (out += d.toString()));
          child.stderr.on('data', (d: Buffer) => (out += d.toString()));
          child.on('close', (code) => resolve({ code, out }));
        });
      // `-o json` prints payloads as protobuf JSON: the decoded input is its base64.
      const plainInput = Buffer.from(JSON.stringify({ customer: 'ACME-HERON-3310' })).toString('base64');
      const ok = await show(`Bearer ${codecToken}`);
      assert.equal(ok.code, 0, ok.out);
      assert.ok(ok.out.includes(plainInput), ok.out.slice(0, 2000));
      const refused = await show('Bearer wrong-token-0123456789');
      assert.ok(!refused.out.includes(plainInput), refused.out.slice(0, 2000));
      // The CLI retries the refused call until its deadline ("context deadline exceeded"), it never says 401.
      assert.notEqual(refused.code, 0, refused.out.slice(0, 2000));
      await clientWith(k1).workflow.getHandle(workflowId).terminate('probe done');
    } finally {
      await web.stop();
    }
  });
});
