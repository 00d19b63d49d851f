// Issue 13: payload encryption and the codec server, on a real Temporal dev server, PostgreSQL and
// the page's real HTTP server. Windows run by workers and clients with the AES-256-GCM codec leave
// no business data in their histories (read without the codec); the page's /codec/decode gives it
// back to the Web UI's origin with the login cookie (CORS checked), and to nobody else; key
// rotation keeps old histories readable; turning encryption on keeps running workflows running.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, test } from 'node:test';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { defaultPayloadConverter, type Payload } from '@temporalio/common';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { memoryLogger } from '../../activities/logger.js';
import { temporalDataConverter } from '../../codec/index.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import { type Catalog } from '../../schedules/job.js';
import { defineCatalog } from '../../schedules/define.js';
import type { RerunState, WindowRunResult } from '../../contract/workflows.js';
import { bundleWorkflows, createWorker } from '../../workers/create-worker.js';
import { allText, payloadsIn } from '../helpers/history.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { eventually, realStack, sharedBundle, uniqueQueue, windowPolicy } from '../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../helpers/web.js';

const stack = realStack();
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
