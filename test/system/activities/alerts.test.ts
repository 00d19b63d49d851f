// No silent failure: alerts over e-mail, Slack and Telegram (real SMTP and HTTP servers on
// loopback), one alert per failure and one recovery notice, a channel down, rate limits,
// the lag watch, and secrets that never leak.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { type JobSpec } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { TickResult } from '../../../contract/workflows.js';
import type { WatchResult } from '../../../activities/watch.js';
import { startChat, type TestChat } from '../../helpers/chat.js';
import { chatTexts, depsWithChannels } from '../../helpers/effects.js';
import { salesJob } from '../../helpers/jobs.js';
import { freePort } from '../../helpers/net.js';
import { startSmtp, type TestSmtp } from '../../helpers/smtp.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';
import { syncSchedulesWithAlerts } from '../../../workers/sync-schedules.js';
import { openIncidents } from '../../../db/effects.js';
import { alertOutboxActivities } from '../../../activities/alert-outbox.js';
import { deliverNow, raiseNow } from '../../../activities/direct-alerts.js';
import { incidentsCommand } from '../../../cli/commands/misc.js';
import type { CliContext } from '../../../cli/context.js';

const stack = realStack();
let smtp: TestSmtp;
let chat: TestChat;
before(async () => {
  [smtp, chat] = await Promise.all([startSmtp({ requireAuth: true }), startChat()]);
});
after(async () => {
  await smtp?.close();
  await chat?.close();
});

const everywhere = { email: ['ops@example.test'], slack: ['#ops'], telegram: ['ops-chat'] };

function failingJob(name: string, fail: () => boolean, extra: Partial<JobSpec> = {}): JobSpec {
  return salesJob(name, {
    start: '2026-09-01T00:00:00Z',
    alerts: everywhere,
    retry: { maximumAttempts: 1 },
    handler: async (ctx) => {
      if (fail()) throw new Error('the source database refused the query');
      return await summariseWindow(ctx);
    },
    ...extra,
  });
}

async function runTick(
  client: Client,
  taskQueue: string,
  job: string,
  now: string,
  n: number,
): Promise<PromiseSettledResult<unknown>[]> {
  const r = (await client.workflow.execute('tick', {
    taskQueue,
    workflowId: `${job}/tick-${n}`,
    args: [{ job, now }],
  })) as TickResult;
  return await Promise.allSettled(r.started.map((k) => client.workflow.getHandle(k).result()));
}

function counts() {
  return {
    mail: smtp.messages.length,
    slack: chatTexts(chat, 'slack').length,
    telegram: chatTexts(chat, 'telegram').length,
  };
}

test('Slack down (HTTP 500, then refused): e-mail and Telegram still alerted, the Slack failure recorded', async () => {
  for (const [job, slackUrl] of [
    ['down-500', undefined],
    ['down-refused', `http://127.0.0.1:${await freePort()}/api`],
  ] as const) {
    const catalog = defineCatalog([failingJob(job, () => true)]);
    const deps = depsWithChannels(stack.t.db, catalog, smtp, chat, slackUrl ? { slackUrl } : {});
    const taskQueue = uniqueQueue(job);
    const before = counts();
    chat.fallback.slack = 'error-500';
    try {
      await withWorker(stack.env, taskQueue, deps, async () => {
        const [window] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 1);
        assert.equal(window?.status, 'rejected');
      });
    } finally {
      chat.fallback.slack = 'ok';
    }
    const now = counts();
    assert.deepEqual(
      [now.mail - before.mail, now.slack - before.slack, now.telegram - before.telegram],
      [1, 0, 1],
      job,
    );
    assert.match(smtp.messages.at(-1)!.subject ?? '', new RegExp(`\\[tidemark\\] ${job}: window failed`));
    assert.match(smtp.messages.at(-1)!.text ?? '', /error: the source database refused the query/);
    assert.match(
      smtp.messages.at(-1)!.text ?? '',
      /run: http:\/\/127\.0\.0\.1:8233\/namespaces\/default\/workflows\/down-/,
    );
    const slackEffect = await stack.t.db
      .selectFrom('effects')
      .selectAll()
      .where('job', '=', job)
      .where('channel', '=', 'slack')
      .executeTakeFirstOrThrow();
    // Refused: certainly not sent, retried, then left failed. A 500 may have been posted: in
    // doubt, and an alert in doubt is sent again (a duplicate alert is better than a lost one),
    // then left unknown. Either way the watch drives it again until it is delivered.
    assert.equal(slackEffect.status, slackUrl ? 'failed' : 'unknown');
    assert.match(slackEffect.last_error ?? '', slackUrl ? /connection failed \(ECONNREFUSED\)/ : /HTTP 500/);
    assert.equal(slackEffect.attempts, 5, 'retried, then recorded');
    const logged = slackUrl ? 'EFFECT not sent' : 'EFFECT unknown';
    assert.ok(deps.logger.lines.some((l) => l.startsWith(`${logged} key=${slackEffect.effect_key}`)));
    const later = new Date(Date.now() + 2 * 3_600_000).toISOString();
    const due = await alertOutboxActivities(deps).alertsDue({ now: later });
    assert.ok(due.includes(slackEffect.effect_key), `the watch drives ${slackEffect.effect_key} again`);
  }
});

for (const api of ['slack', 'telegram'] as const) {
  test(`a ${api} 429 with its retry delay is honoured: one message, sent after the delay`, async () => {
    const job = `rate-limited-${api}`;
    const catalog = defineCatalog([
      failingJob(job, () => true, { alerts: { [api]: [api === 'slack' ? '#ops' : 'ops-chat'] } }),
    ]);
    const taskQueue = uniqueQueue(job);
    const before = chat.requests.length;
    chat.plan[api].push('rate-limit');
    chat.retryAfterSeconds = 1;
    await withWorker(stack.env, taskQueue, depsWithChannels(stack.t.db, catalog, smtp, chat), async () => {
      await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 1);
    });
    const requests = chat.requests.slice(before).filter((r) => r.api === api);
    assert.deepEqual(
      requests.map((r) => r.answer),
      ['rate-limit', 'ok'],
    );
    assert.ok(
      requests[1]!.at - requests[0]!.at >= 1_000,
      `resent after ${requests[1]!.at - requests[0]!.at} ms`,
    );
    assert.equal(chat.messages.filter((m) => m.api === api && m.text.includes(job)).length, 1);
  });
}

test('a tick that fails alerts once; the next good tick sends one recovery notice', async () => {
  const job = 'tick-broken';
  const catalog = defineCatalog([
    salesJob(job, { start: '2026-09-04T00:00:00Z', alerts: { telegram: ['ops-chat'] } }),
  ]);
  const taskQueue = uniqueQueue(job);
  const before = chatTexts(chat, 'telegram').length;
  // A watermark off the job's grid (as after a grid change): the tick refuses to plan.
  await stack.t.db
    .insertInto('job_watermarks')
    .values({ job, watermark: '2026-09-04T00:30:00Z', updated_at: new Date() })
    .execute();
  await withWorker(stack.env, taskQueue, depsWithChannels(stack.t.db, catalog, smtp, chat), async () => {
    for (const n of [1, 2]) {
      await assert.rejects(
        stack.env.client.workflow.execute('tick', {
          taskQueue,
          workflowId: `${job}/tick-${n}`,
          args: [{ job, now: '2026-09-04T03:00:00Z' }],
        }),
        WorkflowFailedError,
      );
    }
    await stack.t.db
      .updateTable('job_watermarks')
      .set({ watermark: '2026-09-04T00:00:00Z' })
      .where('job', '=', job)
      .execute();
    await stack.env.client.workflow.execute('tick', {
      taskQueue,
      workflowId: `${job}/tick-3`,
      args: [{ job, now: '2026-09-04T03:00:00Z' }],
    });
  });
  const texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 2, texts.join('\n---\n'));
  assert.match(texts[0]!, /tick-broken: tick failed \(tick\)/);
  assert.match(texts[0]!, /not on the "1h" grid/);
  assert.match(texts[1]!, /tick-broken: recovered \(tick\)/);
});

test('a window failing 3 times then succeeding: 1 failure alert, 1 recovery notice', async () => {
  const job = 'flaky';
  let failuresLeft = 3;
  const catalog = defineCatalog([
    failingJob(job, () => failuresLeft-- > 0, { alerts: { telegram: ['ops-chat'] } }),
  ]);
  const taskQueue = uniqueQueue(job);
  const before = chatTexts(chat, 'telegram').length;
  await withWorker(stack.env, taskQueue, depsWithChannels(stack.t.db, catalog, smtp, chat), async () => {
    for (let n = 1; n <= 3; n++) {
      const [r] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', n);
      assert.equal(r?.status, 'rejected', `run ${n} fails`);
    }
    const [r4] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 4);
    assert.equal(r4?.status, 'fulfilled');
  });
  const texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 2, texts.join('\n---\n'));
  assert.match(texts[0]!, /flaky: window failed/);
  assert.match(texts[1]!, /flaky: recovered/);
  assert.match(texts[1]!, /\(3 failures\)/);
});

test('the watch: 5 windows behind with threshold 3 alerts once, and clears once caught up', async () => {
  const job = 'lagging';
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-09-02T00:00:00Z',
      lateness: '0m',
      lagThreshold: 3,
      alerts: { telegram: ['ops-chat'] },
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  const before = chatTexts(chat, 'telegram').length;
  // The watch inspects a task queue that no worker polls, as if the job's workers were all gone.
  const deps = {
    ...depsWithChannels(stack.t.db, catalog, smtp, chat),
    temporal: { client: stack.env.client, taskQueue: 'nobody-polls-this' },
  };
  await withWorker(stack.env, taskQueue, deps, async () => {
    const watch = (n: number) =>
      stack.env.client.workflow.execute('watch', {
        taskQueue,
        workflowId: `watch-${n}`,
        args: [{ now: '2026-09-02T05:00:00Z' }],
      }) as Promise<WatchResult>;
    const first = await watch(1);
    assert.deepEqual(
      first.reports.map((r) => [r.job, r.behind]),
      [[job, 5]],
    );
    // The job has no schedule here: the watch says so in the alert.
    assert.match(first.reports[0]!.diagnosis.join('; '), /schedule tidemark:lagging cannot be read/);
    assert.match(first.reports[0]!.diagnosis.join('; '), /no worker polls task queue "nobody-polls-this"/);
    await watch(2);
    assert.equal(chatTexts(chat, 'telegram').length - before, 1, 'one lag alert for two watches');
    assert.match(chatTexts(chat, 'telegram').at(-1)!, /lagging: falling behind/);
    assert.match(chatTexts(chat, 'telegram').at(-1)!, /5 windows behind \(threshold 3\)/);
    await runTick(stack.env.client, taskQueue, job, '2026-09-02T05:00:00Z', 1);
    const caughtUp = await watch(3);
    assert.deepEqual(
      caughtUp.reports.map((r) => r.behind),
      [0],
    );
    await watch(4);
  });
  const texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 2);
  assert.match(texts[1]!, /lagging: recovered/);
});

/** Every string in a workflow history, payloads decoded. */
function historyText(events: unknown[]): string {
  const parts: string[] = [];
  const walk = (v: unknown): void => {
    if (v instanceof Uint8Array) parts.push(Buffer.from(v).toString('utf8'));
    else if (typeof v === 'string') parts.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(events);
  return parts.join('\n');
}

test('a canary secret appears in no log line, alert, workflow payload or ledger row', async () => {
  const job = 'canary';
  const secrets = {
    smtpUser: 'tidemark',
    smtpPassword: 'canary-smtp-7f3a91',
    slackToken: 'xoxb-canary-5e21c8',
    telegramToken: '999:canary-tg-b4d2',
  };
  // The failure itself carries a secret, as a careless driver error might.
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-09-03T00:00:00Z',
      alerts: everywhere,
      retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms' },
      handler: async () => {
        throw new Error(
          `login failed for tidemark with password ${secrets.smtpPassword} (token ${secrets.slackToken})`,
        );
      },
    }),
  ]);
  const deps = depsWithChannels(stack.t.db, catalog, smtp, chat, { secrets });
  const taskQueue = uniqueQueue(job);
  const [mailBefore, chatBefore] = [smtp.messages.length, chat.messages.length];
  await withWorker(stack.env, taskQueue, deps, async () => {
    await assert.rejects(
      runTick(stack.env.client, taskQueue, job, '2026-09-03T01:10:00Z', 1).then((r) => {
        if (r[0]?.status === 'rejected') throw r[0].reason;
      }),
      (err: unknown) => err instanceof WorkflowFailedError,
    );
  });
  // The secrets were in use: the servers saw them.
  assert.ok(smtp.auths.some((a) => a.password === secrets.smtpPassword));
  assert.ok(chat.messages.some((m) => m.auth === `Bearer ${secrets.slackToken}`));
  assert.ok(chat.messages.some((m) => m.path.includes(secrets.telegramToken)));

  const alerts = [
    ...smtp.messages.slice(mailBefore).map((m) => `${m.subject}\n${m.text}`),
    ...chat.messages.slice(chatBefore).map((m) => m.text),
  ];
  assert.equal(alerts.length, 3);
  assert.ok(
    alerts.every((a) => a.includes('login failed for tidemark with password ***')),
    alerts.join('\n---\n'),
  );
  const histories: string[] = [];
  for await (const wf of stack.env.client.workflow.list({ query: `WorkflowId STARTS_WITH "${job}/"` })) {
    histories.push(
      historyText(
        (await stack.env.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? [],
      ),
    );
  }
  assert.ok(histories.length >= 2, 'the tick and the window were read');
  assert.ok(histories.join('\n').includes('password ***'), 'the redacted failure is in the history');
  const rows = JSON.stringify(
    await Promise.all([
      stack.t.db.selectFrom('effects').selectAll().where('job', '=', job).execute(),
      stack.t.db.selectFrom('incidents').selectAll().where('job', '=', job).execute(),
      stack.t.db.selectFrom('job_windows').selectAll().where('job', '=', job).execute(),
      stack.t.db.selectFrom('job_runs').selectAll().where('job', '=', job).execute(),
    ]),
  );
  const everything = [...deps.logger.lines, ...alerts, ...histories, rows].join('\n');
  for (const secret of [secrets.smtpPassword, secrets.slackToken, secrets.telegramToken]) {
    assert.ok(!everything.includes(secret), `${secret} leaked`);
  }
});

test('a schedule that cannot be synced alerts once; a later good sync clears it', async () => {
  const job = 'sync-broken';
  const catalog = defineCatalog([salesJob(job, { alerts: { telegram: ['ops-chat'] } })]);
  const deps = depsWithChannels(stack.t.db, catalog, smtp, chat);
  const before = chatTexts(chat, 'telegram').length;
  // A real server answering "namespace not found" for every call.
  const broken = new Client({ connection: stack.env.client.connection, namespace: 'no-such-namespace' });
  for (let i = 0; i < 2; i++) {
    const plan = await syncSchedulesWithAlerts(deps, broken, catalog, { taskQueue: 'q', apply: true });
    assert.ok(
      plan.failed.some((f) => f.job === job && /namespace/i.test(f.error)),
      JSON.stringify(plan.failed),
    );
  }
  let texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 1, 'two failed syncs, one alert');
  assert.match(texts[0]!, /sync-broken: schedule sync failed/);
  const plan = await syncSchedulesWithAlerts(deps, stack.env.client, catalog, {
    taskQueue: 'q',
    apply: true,
  });
  assert.deepEqual(plan.failed, []);
  texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 2);
  assert.match(texts[1]!, /sync-broken: recovered \(schedules\)/);
});

// Issue 8 item 7: an alert that could not be delivered is not forgotten.
test('an alert undelivered while Telegram is down goes out with the next repeat of its open incident, once', async () => {
  const job = 'alert-later';
  const port = await freePort();
  const catalog = defineCatalog([failingJob(job, () => true, { alerts: { telegram: ['ops-chat'] } })]);
  const deps = depsWithChannels(stack.t.db, catalog, smtp, chat, {
    telegramUrl: `http://127.0.0.1:${port}`,
  });
  const taskQueue = uniqueQueue(job);
  let upChat: TestChat | undefined;
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      const [first] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 1);
      assert.equal(first?.status, 'rejected');
      const alert = await stack.t.db
        .selectFrom('effects')
        .selectAll()
        .where('job', '=', job)
        .where('name', '=', 'alert-opened')
        .executeTakeFirstOrThrow();
      assert.equal(alert.status, 'failed', 'Telegram is down: the first alert is not delivered');
      // Telegram comes back; the window fails again while its incident is still open.
      upChat = await startChat({ port });
      const [second] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 2);
      assert.equal(second?.status, 'rejected');
      const [third] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 3);
      assert.equal(third?.status, 'rejected');
    });
    const texts = chatTexts(upChat!, 'telegram');
    assert.equal(texts.length, 1, texts.join('\n---\n'));
    assert.match(texts[0]!, /alert-later: window failed/);
    const [incident] = await stack.t.db.selectFrom('incidents').selectAll().where('job', '=', job).execute();
    assert.equal(incident?.occurrences, 3);
  } finally {
    await upChat?.close();
  }
});

test('the watch re-drives undelivered alerts with backoff; a channel that stays down is reported through the others and listed, then cleared', async () => {
  const job = 'alert-watch';
  const port = await freePort();
  const catalog = defineCatalog([
    failingJob(job, () => true, {
      alerts: { email: ['ops@example.test'], telegram: ['ops-chat'] },
      lagThreshold: 100_000,
    }),
  ]);
  const deps = depsWithChannels(stack.t.db, catalog, smtp, chat, {
    telegramUrl: `http://127.0.0.1:${port}`,
  });
  const taskQueue = uniqueQueue(job);
  const mails = () => smtp.messages.filter((m) => (m.subject ?? '').includes(job));
  const telegramAlert = () =>
    stack.t.db
      .selectFrom('effects')
      .selectAll()
      .where('job', '=', job)
      .where('name', '=', 'alert-opened')
      .where('channel', '=', 'telegram')
      .orderBy('created_at')
      .executeTakeFirstOrThrow();
  let upChat: TestChat | undefined;
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      const watch = (n: number, aheadMs: number | null) =>
        stack.env.client.workflow.execute('watch', {
          taskQueue,
          workflowId: `${job}-watch-${n}`,
          args: [aheadMs === null ? {} : { now: new Date(Date.now() + aheadMs).toISOString() }],
        }) as Promise<WatchResult>;
      const [window] = await runTick(stack.env.client, taskQueue, job, '2026-09-01T01:10:00Z', 1);
      assert.equal(window?.status, 'rejected');
      assert.equal(mails().length, 1, 'e-mail heard of the failure');
      const failed = await telegramAlert();
      assert.equal(failed.status, 'failed');

      // Right after its failed attempts the alert is not due again yet (backoff), but the
      // channel that stayed down is reported through e-mail and listed as an incident.
      await watch(1, null);
      assert.equal((await telegramAlert()).attempts, failed.attempts, 'not retried before its backoff');
      const open = await openIncidents(stack.t.db, job);
      const down = open.find((i) => i.kind === 'alert-undelivered');
      assert.ok(down, JSON.stringify(open));
      assert.match(down.subject, /telegram/);
      assert.match(down.subject, /ops-chat/);
      const listed = await incidentsCommand.run({ db: async () => stack.t.db } as unknown as CliContext, {
        positionals: [],
        values: { job },
      });
      assert.match(listed.lines.join('\n'), /alerts:telegram:ops-chat +alert-undelivered/);
      assert.equal(mails().length, 2);
      assert.match(mails()[1]!.subject ?? '', /alert-watch: alerts undelivered/);

      // Later, still down: retried, still failed, reported no second time.
      await watch(2, 3_600_000);
      const retried = await telegramAlert();
      assert.ok(retried.attempts > failed.attempts, 'retried once its backoff passed');
      assert.equal(retried.status, 'failed');
      assert.equal(mails().length, 2);

      // Telegram comes back: the alert goes out once, and the channel's incident clears.
      upChat = await startChat({ port });
      await watch(3, 6 * 3_600_000);
      assert.equal((await telegramAlert()).status, 'done');
      await watch(4, 12 * 3_600_000);
      assert.ok(!(await openIncidents(stack.t.db, job)).some((i) => i.kind === 'alert-undelivered'));
    });
    const texts = chatTexts(upChat!, 'telegram');
    assert.equal(texts.filter((t) => /alert-watch: window failed/.test(t)).length, 1, texts.join('\n---\n'));
    assert.ok(
      texts.some((t) => /alert-watch: recovered/.test(t)),
      texts.join('\n---\n'),
    );
    assert.equal(mails().length, 3);
    assert.match(mails()[2]!.subject ?? '', /alert-watch: recovered/);
  } finally {
    await upChat?.close();
  }
});

// Issue 8 item 8: the settle step runs after the commit; its failure is a failure like any other.
test('a settle step that fails opens an incident and alerts; its secret never reaches the history', async () => {
  const job = 'settle-fails';
  const secrets = {
    smtpUser: 'tidemark',
    smtpPassword: 'canary-smtp-settle-31c7',
    slackToken: 'xoxb-canary-settle-92ab',
    telegramToken: '998:canary-tg-settle-6d0e',
  };
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-09-05T00:00:00Z',
      alerts: { telegram: ['ops-chat'] },
      retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms' },
      settle: async () => {
        throw new Error(`marketplace status read failed (token ${secrets.slackToken})`);
      },
    }),
  ]);
  const deps = depsWithChannels(stack.t.db, catalog, smtp, chat, { secrets });
  const taskQueue = uniqueQueue(job);
  const before = chatTexts(chat, 'telegram').length;
  await withWorker(stack.env, taskQueue, deps, async () => {
    const tick = (await stack.env.client.workflow.execute('tick', {
      taskQueue,
      workflowId: `${job}/tick-1`,
      args: [{ job, now: '2026-09-05T01:10:00Z' }],
    })) as TickResult;
    assert.equal(tick.started.length, 1);
    const incident = await eventually(
      async () =>
        (await stack.t.db.selectFrom('incidents').selectAll().where('job', '=', job).executeTakeFirst()) ??
        undefined,
      60_000,
      'the settle failure to open an incident',
    );
    assert.match(incident.last_error, /marketplace status read failed \(token \*\*\*\)/);
    await assert.rejects(stack.env.client.workflow.getHandle(tick.started[0]!).result(), WorkflowFailedError);
  });
  const texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 1, texts.join('\n---\n'));
  assert.match(texts[0]!, /settle-fails: settle failed/);
  assert.match(texts[0]!, /token \*\*\*/);
  const histories: string[] = [];
  for await (const wf of stack.env.client.workflow.list({ query: `WorkflowId STARTS_WITH "${job}/"` })) {
    histories.push(
      historyText(
        (await stack.env.client.workflow.getHandle(wf.workflowId, wf.runId).fetchHistory()).events ?? [],
      ),
    );
  }
  assert.ok(histories.join('\n').includes('token ***'), 'the redacted failure is in the history');
  const everything = [...deps.logger.lines, ...texts, ...histories].join('\n');
  assert.ok(!everything.includes(secrets.slackToken), 'the settle secret leaked');
});

// Issue 8 item 9: the worker dies after the window committed; the retry must still tell.
test('a crash after the commit loses neither the finding alert nor the recovery notice', async () => {
  const job = 'crash-after-commit';
  let run = 0;
  const catalog = defineCatalog([
    salesJob(job, {
      start: '2026-09-06T00:00:00Z',
      alerts: { telegram: ['ops-chat'] },
      retry: { maximumAttempts: 3, initialInterval: '100ms', maximumInterval: '100ms' },
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        // The first run fails for good (counts that do not add up are not retried).
        if (run++ === 0) return { ...counts, input: counts.input + 1 };
        return {
          ...counts,
          findings: [{ subject: 'reconcile:target', message: 'target differs from source for 2 key(s)' }],
        };
      },
    }),
  ]);
  const base = depsWithChannels(stack.t.db, catalog, smtp, chat);
  // The worker "dies" right after the commit once: the activity fails after its transaction committed.
  let crashed = false;
  const logger = {
    ...base.logger,
    info: (line: string) => {
      if (line.startsWith('PROCESSED') && line.includes(job) && !crashed) {
        crashed = true;
        throw new Error('worker lost right after the commit');
      }
      base.logger.info(line);
    },
  };
  const deps = { ...base, logger };
  const taskQueue = uniqueQueue(job);
  const before = chatTexts(chat, 'telegram').length;
  await withWorker(stack.env, taskQueue, deps, async () => {
    const [first] = await runTick(stack.env.client, taskQueue, job, '2026-09-06T01:10:00Z', 1);
    assert.equal(first?.status, 'rejected');
    const [second] = await runTick(stack.env.client, taskQueue, job, '2026-09-06T01:10:00Z', 2);
    assert.equal(second?.status, 'fulfilled');
  });
  assert.ok(crashed, 'the simulated crash happened after the commit');
  assert.ok(base.logger.lines.some((l) => l.startsWith(`SKIPPED reason=already-done job=${job}`)));
  const texts = chatTexts(chat, 'telegram').slice(before);
  assert.equal(texts.length, 3, texts.join('\n---\n'));
  assert.equal(texts.filter((t) => /crash-after-commit: window failed/.test(t)).length, 1);
  assert.equal(texts.filter((t) => /crash-after-commit: recovered/.test(t)).length, 1);
  const finding = texts.filter((t) => /crash-after-commit: needs attention/.test(t));
  assert.equal(finding.length, 1);
  assert.match(finding[0]!, /target differs from source for 2 key\(s\)/);
});

test('an alert from outside a workflow that failed once is reported as its channel down only after a minute, then stays reported', async () => {
  const job = 'alert-direct';
  const port = await freePort();
  const catalog = defineCatalog([
    salesJob(job, { alerts: { email: ['ops@example.test'], telegram: ['ops-chat'] } }),
  ]);
  const deps = depsWithChannels(stack.t.db, catalog, smtp, chat, {
    telegramUrl: `http://127.0.0.1:${port}`,
  });
  const mails = () => smtp.messages.filter((m) => (m.subject ?? '').includes(job));
  await raiseNow(deps, {
    job,
    subject: 'schedules',
    kind: 'schedule-sync-failed',
    error: 'namespace not found',
  });
  assert.equal(mails().length, 1);
  const outbox = alertOutboxActivities(deps);
  const down = async () =>
    (await openIncidents(stack.t.db, job)).filter((i) => i.kind === 'alert-undelivered').length;
  const at = (ms: number) => ({ now: new Date(Date.now() + ms).toISOString() });
  await deliverNow(deps, await outbox.reportUndeliveredAlerts(at(0)));
  assert.equal(await down(), 0, 'one failed attempt a moment ago is not yet a channel down');
  await deliverNow(deps, await outbox.reportUndeliveredAlerts(at(120_000)));
  assert.equal(await down(), 1);
  assert.equal(mails().length, 2);
  // Driven again and failed again: the report stays open, and is not sent twice.
  await deliverNow(deps, await outbox.alertsDue(at(180_000)));
  await deliverNow(deps, await outbox.reportUndeliveredAlerts(at(180_000)));
  assert.equal(await down(), 1);
  assert.equal(mails().length, 2);
});
