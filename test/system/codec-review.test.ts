// Review of issue 13's payload codec (hostile probes on a real Temporal dev server): what the codec
// leaves behind that a key rotation or a keyless process trips over.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { memoryLogger } from '../../activities/logger.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import { bundleWorkflows, createWorker } from '../../workers/create-worker.js';
import { AesGcmCodec, payloadKeysFrom, temporalDataConverter } from '../../codec/index.js';
import { defineCatalog } from '../../schedules/define.js';
import { syncSchedules } from '../../workers/schedule-sync.js';
import { scheduleIdOf, WATCH_SCHEDULE_ID } from '../../contract/schedule-ids.js';
import { allText, payloadsIn } from '../helpers/history.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { eventually, realStack, uniqueQueue } from '../helpers/temporal.js';
import { postLogin, sessionCookie, startWeb } from '../helpers/web.js';

const stack = realStack();
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
