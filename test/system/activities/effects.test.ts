// External effects through the guard, against a real SMTP server and real HTTP servers on
// loopback: lost replies, deferrals, rejections, a worker killed between begin and done.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createServer as createHttpServer } from 'node:http';
import { ApplicationFailure, WorkflowFailedError } from '@temporalio/client';
import { effectActivities } from '../../../activities/effects.js';
import { httpApiProvider } from '../../../activities/notify/http-api.js';
import { recordEffects } from '../../../db/effects.js';
import { decideUnknownEffect, retryFailedEffect } from '../../../activities/decisions.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { type Catalog, type JobSpec } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowRunResult } from '../../../contract/workflows.js';
import {
  attemptOutcomes,
  chatTexts,
  depsWithChannels,
  loopbackChannels,
  effectRow,
  summaryWithMail,
  effectRunPolicy,
} from '../../helpers/effects.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { spawnWorker, workerProcessEnv } from '../../helpers/processes.js';
import { realStack, uniqueQueue, windowByHand, withWorker } from '../../helpers/temporal.js';

const stack = realStack();
const channels = loopbackChannels();
const channelDeps = (catalog: Catalog) => depsWithChannels(stack.t.db, catalog, channels.smtp, channels.chat);

/** The sales summary plus one report e-mail per window. */
const withReport = summaryWithMail((ctx, applied) => ({
  html: `<p>orders: <b>${applied}</b></p>`,
  attachments: [
    {
      filename: 'orders.csv',
      contentType: 'text/csv',
      contentBase64: Buffer.from(`window,orders\n${ctx.key},${applied}\n`).toString('base64'),
    },
  ],
}));

function reportJob(name: string, extra: Partial<JobSpec> = {}): JobSpec {
  return salesJob(name, {
    start: '2026-08-01T00:00:00Z',
    handler: withReport,
    alerts: { telegram: ['ops-chat'] },
    retry: { maximumAttempts: 3, initialInterval: '100ms', maximumInterval: '200ms' },
    ...extra,
  });
}

async function runWindow(
  taskQueue: string,
  job: string,
  start: string,
  end: string,
): Promise<WindowRunResult> {
  return (await windowByHand(
    stack.env.client,
    taskQueue,
    job,
    start,
    end,
    effectRunPolicy,
  )) as WindowRunResult;
}

const incomplete = (err: unknown) =>
  err instanceof WorkflowFailedError && /effect\(s\) are not done/.test(String(err.cause?.message));

test('SMTP stores the message and drops the connection before answering: unknown, no resend, one alert, resent only when approved', async () => {
  const job = 'mail-drop';
  const catalog = defineCatalog([reportJob(job)]);
  const deps = channelDeps(catalog);
  const taskQueue = uniqueQueue(job);
  const key = `${job}/2026-08-01T00:00:00Z:report`;
  const [smtpBefore, alertsBefore] = [
    channels.smtp.messages.length,
    chatTexts(channels.chat, 'telegram').length,
  ];
  await insertOrders(stack.t.db, ordersBetween(job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z', 10));
  await withWorker(stack.env, taskQueue, deps, async () => {
    channels.smtp.plan.push('store-then-drop');
    await assert.rejects(
      runWindow(taskQueue, job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z'),
      incomplete,
    );
    assert.equal(channels.smtp.messages.length - smtpBefore, 1, 'the server stored the message');
    assert.equal((await effectRow(stack.t.db, key)).status, 'unknown');
    const alerts = chatTexts(channels.chat, 'telegram').slice(alertsBefore);
    assert.equal(alerts.length, 1);
    assert.match(alerts[0]!, /effect outcome unknown/);
    assert.match(
      alerts[0]!,
      new RegExp(`tidemark effects decide ${key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`),
    );

    // The window presented again: already done; its effect is still unknown and is not resent.
    await assert.rejects(
      runWindow(taskQueue, job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z'),
      incomplete,
    );
    assert.equal(channels.smtp.messages.length - smtpBefore, 1, 'no automatic resend');
    assert.equal(
      chatTexts(channels.chat, 'telegram').length - alertsBefore,
      1,
      'no second alert for the same incident',
    );
  });

  // An operator approves the resend: it is sent once more, and the incident clears.
  const result = await decideUnknownEffect(deps, key, 'resend', 'alice');
  assert.equal(result.outcome, 'done');
  assert.equal(channels.smtp.messages.length - smtpBefore, 2);
  const row = await effectRow(stack.t.db, key);
  // The one-time resend decision was used by the resend; who decided stays on the row.
  assert.deepEqual([row.status, row.decision, row.decided_by, row.attempts], ['done', null, 'alice', 2]);
  assert.equal(
    channels.smtp.messages.at(-1)!.messageId,
    channels.smtp.messages.at(-2)!.messageId,
    'the same Message-ID on both sends',
  );
  const after = chatTexts(channels.chat, 'telegram').slice(alertsBefore);
  assert.equal(after.length, 2);
  assert.match(after[1]!, /recovered/);
  await assert.rejects(decideUnknownEffect(deps, key, 'resend', 'bob'), /is done, not unknown/);
});

test('a transient SMTP 4xx then success: one message, two attempts recorded', async () => {
  const job = 'mail-defer';
  const catalog = defineCatalog([reportJob(job)]);
  const taskQueue = uniqueQueue(job);
  const key = `${job}/2026-08-01T00:00:00Z:report`;
  const before = channels.smtp.messages.length;
  await withWorker(stack.env, taskQueue, channelDeps(catalog), async () => {
    channels.smtp.plan.push('defer');
    const r = await runWindow(taskQueue, job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z');
    assert.deepEqual(
      r.effectOutcomes.map((o) => o.outcome),
      ['done'],
    );
  });
  assert.equal(channels.smtp.messages.length - before, 1);
  const mail = channels.smtp.messages.at(-1)!;
  assert.equal(mail.subject, `report ${job}/2026-08-01T00:00:00Z`);
  const n = /^orders: (\d+)$/.exec(mail.text?.trim() ?? '')?.[1];
  assert.ok(n !== undefined, mail.text);
  assert.equal(mail.html, `<p>orders: <b>${n}</b></p>`);
  assert.deepEqual(
    mail.attachments.map((a) => [a.filename, a.contentType, a.content.toString('utf8')]),
    [['orders.csv', 'text/csv', `window,orders\n${job}/2026-08-01T00:00:00Z,${n}\n`]],
  );
  assert.deepEqual(await attemptOutcomes(stack.t.db, key), ['failed', 'done']);
  const row = await effectRow(stack.t.db, key);
  assert.equal(row.status, 'done');
  assert.match(row.provider_id ?? '', /^<[0-9a-f]{40}@tidemark>$/);
});

test('a permanent SMTP 5xx: one attempt, one alert, the effect failed', async () => {
  const job = 'mail-reject';
  const catalog = defineCatalog([reportJob(job)]);
  const taskQueue = uniqueQueue(job);
  const key = `${job}/2026-08-01T00:00:00Z:report`;
  const [offered, alertsBefore] = [channels.smtp.offered, chatTexts(channels.chat, 'telegram').length];
  await withWorker(stack.env, taskQueue, channelDeps(catalog), async () => {
    channels.smtp.plan.push('reject');
    await assert.rejects(
      runWindow(taskQueue, job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z'),
      incomplete,
    );
  });
  assert.equal(channels.smtp.offered - offered, 1, 'one attempt');
  assert.deepEqual(await attemptOutcomes(stack.t.db, key), ['failed']);
  const row = await effectRow(stack.t.db, key);
  assert.equal(row.status, 'failed');
  assert.match(row.last_error ?? '', /550/);
  const alerts = chatTexts(channels.chat, 'telegram').slice(alertsBefore);
  assert.equal(alerts.length, 1);
  assert.match(alerts[0]!, /effect failed/);

  // Once the mailbox exists, an operator retries it: sent once, the incident clears.
  const result = await retryFailedEffect(channelDeps(catalog), key, 'alice');
  assert.equal(result.outcome, 'done');
  assert.equal(channels.smtp.offered - offered, 2);
  assert.match(chatTexts(channels.chat, 'telegram').at(-1)!, /mail-reject: recovered/);
  await assert.rejects(retryFailedEffect(channelDeps(catalog), key, 'alice'), /is done, not failed/);
});

test('the worker killed between begin and done: on restart the policy applies, nothing is sent twice', async () => {
  const job = 'mail-kill';
  const taskQueue = uniqueQueue(job);
  const key = `${job}/2026-08-01T00:00:00Z:report`;
  const [before, alertsBefore] = [channels.smtp.messages.length, chatTexts(channels.chat, 'telegram').length];
  const workerEnv = (kill: boolean) =>
    workerProcessEnv(stack, taskQueue, {
      name: job,
      grid: '1h',
      start: '2026-08-01T00:00:00Z',
      holdMs: 0,
      smtpPort: channels.smtp.port,
      telegramUrl: channels.chat.telegramUrl,
      effectTimeout: '2s',
      killAfterEffect: kill,
    });
  const doomed = await spawnWorker('doomed', workerEnv(true));
  const run = runWindow(taskQueue, job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z');
  // Handled from the start: the survivor may fail the window before spawnWorker returns.
  run.catch(() => undefined);
  await new Promise<void>((resolve) => doomed.child.once('exit', () => resolve()));
  assert.equal(doomed.child.signalCode, 'SIGKILL');
  assert.equal(channels.smtp.messages.length - before, 1, 'the message went out before the kill');
  assert.equal((await effectRow(stack.t.db, key)).status, 'begun', 'begin without done');
  const survivor = await spawnWorker('survivor', workerEnv(false));
  try {
    await assert.rejects(run, incomplete);
  } finally {
    await survivor.stop();
  }
  assert.equal(channels.smtp.messages.length - before, 1, 'not sent twice');
  const row = await effectRow(stack.t.db, key);
  assert.equal(row.status, 'unknown');
  assert.match(row.last_error ?? '', /never marked done/);
  const alerts = chatTexts(channels.chat, 'telegram').slice(alertsBefore);
  assert.equal(alerts.length, 1);
  assert.match(alerts[0]!, /effect outcome unknown/);
});

test('attempts racing for one effect: the fencing number lets exactly one act', async () => {
  const job = 'mail-race';
  const catalog = defineCatalog([reportJob(job)]);
  const deps = channelDeps(catalog);
  const key = `${job}/2026-08-01T00:00:00Z:report`;
  await recordEffects(stack.t.db, [
    {
      key,
      job,
      windowKey: `${job}/2026-08-01T00:00:00Z`,
      name: 'report',
      channel: 'email',
      policy: 'ask',
      request: { to: ['ops@example.test'], subject: 'race', text: 'once' },
      providerKey: key,
    },
  ]);
  const before = channels.smtp.messages.length;
  const { performEffect } = effectActivities(deps);
  const results = await Promise.allSettled(Array.from({ length: 6 }, () => performEffect({ key })));
  const done = results.filter((r) => r.status === 'fulfilled' && r.value.outcome === 'done');
  const held = results.filter(
    (r) =>
      r.status === 'rejected' &&
      r.reason instanceof ApplicationFailure &&
      r.reason.type === 'EffectInProgress',
  );
  assert.equal(done.length, 1);
  assert.equal(
    held.length +
      done.length +
      results.filter((r) => r.status === 'fulfilled' && r.value.outcome === 'already-done').length,
    6,
  );
  assert.equal(channels.smtp.messages.length - before, 1);
  assert.equal((await effectRow(stack.t.db, key)).attempts, 1);
});

/** An HTTP API on loopback that honours Idempotency-Key and can apply a request and then never answer it. */
async function startIdempotentApi() {
  const applied = new Map<string, unknown>();
  const seen: string[] = [];
  let hangNext = false;
  const server = createHttpServer((req, res) => {
    void (async () => {
      const key = String(req.headers['idempotency-key'] ?? '');
      if (req.method === 'GET') {
        res.writeHead(applied.has(decodeURIComponent(req.url!.slice('/status/'.length))) ? 200 : 404).end();
        return;
      }
      const chunks: Buffer[] = [];
      let body: unknown;
      try {
        for await (const c of req) chunks.push(c as Buffer);
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return; // the client gave up before its request was read: not applied, not seen
      }
      seen.push(key);
      if (!applied.has(key)) applied.set(key, body);
      // Applied, and the reply never comes: the client can only time out, however busy the machine.
      if (hangNext) {
        hangNext = false;
        return;
      }
      res
        .writeHead(200, { 'content-type': 'application/json', 'x-request-id': `req-${seen.length}` })
        .end('{"ok":true}');
    })();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    applied,
    seen,
    hangNext: () => {
      hangNext = true;
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

test('an HTTP API declared to honour Idempotency-Key applies a request and then times out: resent with the same key, applied once', async () => {
  const api = await startIdempotentApi();
  const job = 'http-timeout';
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-08-01T00:00:00Z',
      alerts: { telegram: ['ops-chat'] },
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        effects: [
          {
            name: 'push',
            channel: 'http',
            request: {
              method: 'POST',
              url: `${api.url}/prices`,
              body: { window: ctx.key, price: 10 },
              honoursIdempotencyKey: true,
            },
          },
        ],
      }),
    }),
  ]);
  const deps = {
    ...channelDeps(catalog),
    channels: {
      ...channelDeps(catalog).channels,
      http: httpApiProvider({ timeoutMs: 1_000 }),
    },
  };
  const taskQueue = uniqueQueue(job);
  try {
    api.hangNext();
    await withWorker(stack.env, taskQueue, deps, async () => {
      const r = await runWindow(taskQueue, job, '2026-08-01T00:00:00Z', '2026-08-01T01:00:00Z');
      assert.deepEqual(
        r.effectOutcomes.map((o) => o.outcome),
        ['done'],
      );
    });
    const key = `${job}/2026-08-01T00:00:00Z:push`;
    assert.deepEqual(api.seen, [key, key], 'the same key twice');
    assert.equal(api.applied.size, 1, 'applied once');
    // One attempt per lost reply (a busy machine may lose one before the request is read), then done.
    const outcomes = await attemptOutcomes(stack.t.db, key);
    assert.equal(outcomes.at(-1), 'done', outcomes.join(', '));
    assert.ok(outcomes.length >= 2, outcomes.join(', '));
    assert.ok(
      outcomes.slice(0, -1).every((o) => o === 'unknown (to be resent)'),
      outcomes.join(', '),
    );
  } finally {
    await api.close();
  }
});

test('a begin without a done, where the API can say what happened: the guard asks before acting', async () => {
  const api = await startIdempotentApi();
  const job = 'http-check';
  const catalog = defineCatalog([salesJob(job)]);
  const deps = {
    ...channelDeps(catalog),
    channels: { http: httpApiProvider({ timeoutMs: 1_000 }) },
  };
  try {
    const [applied, absent] = [`${job}/a:push`, `${job}/b:push`];
    api.applied.set(applied, { earlier: true });
    for (const key of [applied, absent]) {
      await recordEffects(stack.t.db, [
        {
          key,
          job,
          windowKey: null,
          name: 'push',
          channel: 'http',
          policy: 'ask',
          providerKey: key,
          request: {
            method: 'POST',
            url: `${api.url}/prices`,
            body: { k: key },
            statusUrl: `${api.url}/status/${encodeURIComponent(key)}`,
          },
        },
      ]);
      // The attempt that began it died long ago.
      await stack.t.db
        .updateTable('effects')
        .set({
          status: 'begun',
          fence: 1,
          attempts: 1,
          begun_at: new Date(Date.now() - 600_000),
          lease_until: new Date(Date.now() - 540_000),
        })
        .where('effect_key', '=', key)
        .execute();
    }
    const { performEffect } = effectActivities(deps);
    assert.equal((await performEffect({ key: applied })).outcome, 'done');
    assert.deepEqual(api.seen, [], 'confirmed by the API, not sent again');
    assert.equal((await performEffect({ key: absent })).outcome, 'done');
    assert.deepEqual(api.seen, [absent], 'the API had not seen it: sent once');
  } finally {
    await api.close();
  }
});

test("an effect's own retry policy bounds its attempts apart from the job's, and holds when it is driven again", async () => {
  const hits = new Map<string, number>();
  const server = createHttpServer((req, res) => {
    req.resume();
    req.on('end', () => {
      hits.set(req.url!, (hits.get(req.url!) ?? 0) + 1);
      res.writeHead(429).end('slow down');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const job = 'http-retry';
  const push = (name: string, retry: { maximumAttempts: number }) => ({
    name,
    channel: 'http' as const,
    request: { method: 'POST' as const, url: `${url}/${name}`, body: { n: 1 } },
    retry: { ...retry, initialInterval: '20ms', maximumInterval: '50ms' },
  });
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-08-01T00:00:00Z',
      alerts: { telegram: ['ops-chat'] },
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        effects: [push('patient', { maximumAttempts: 5 }), push('once', { maximumAttempts: 1 })],
      }),
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  const start = '2026-08-01T00:00:00Z';
  const deps = channelDeps(catalog);
  try {
    await withWorker(
      stack.env,
      taskQueue,
      { ...deps, channels: { ...deps.channels, http: httpApiProvider() } },
      async () => {
        // The job's policy allows 3 attempts (effectRunPolicy); each effect's own bounds it.
        await assert.rejects(runWindow(taskQueue, job, start, '2026-08-01T01:00:00Z'), incomplete);
        assert.deepEqual(Object.fromEntries(hits), { '/patient': 5, '/once': 1 });
        const row = await effectRow(stack.t.db, `${job}/${start}:patient`);
        assert.equal(row.status, 'failed');
        assert.deepEqual(row.retry, {
          maximumAttempts: 5,
          initialInterval: '20ms',
          maximumInterval: '50ms',
          backoffCoefficient: 1,
        });
        // Run again, the window is done: its open effects are driven with the policy stored with them.
        await assert.rejects(runWindow(taskQueue, job, start, '2026-08-01T01:00:00Z'), incomplete);
        assert.deepEqual(Object.fromEntries(hits), { '/patient': 10, '/once': 2 });
      },
    );
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
});
