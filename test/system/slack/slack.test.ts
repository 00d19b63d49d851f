// Rerun approvals from Slack: correctly signed requests posted to the running Bolt app; forged,
// stale and tampered ones get 401 and cause nothing; an unauthorised user is refused, told and
// audited; two approvers clicking at once cause one rerun; the message is updated in place.
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type { ActivityDeps } from '../../../activities/index.js';
import { memoryLogger } from '../../../activities/logger.js';
import { emailProvider } from '../../../activities/notify/email.js';
import { slackProvider } from '../../../activities/notify/slack.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { defineCatalog } from '../../../schedules/define.js';
import { startSlackApp, type SlackAppOptions } from '../../../slack/app.js';
import { run as runCli } from '../../../cli/main.js';
import { requestRerun, requestState } from '../../../operator/reruns.js';
import { loadConfig } from '../../../config/env.js';
import { directoryOf } from '../../../config/people.js';
import { buildCatalog } from '../../../jobs/catalog.js';
import type { RerunResult, RerunState } from '../../../contract/workflows.js';
import { startChat, type TestChat } from '../../helpers/chat.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { freePort } from '../../helpers/net.js';
import { startSmtp } from '../../helpers/smtp.js';
import { eventually, realStack, uniqueQueue, windowPolicy, withWorker } from '../../helpers/temporal.js';
import { SCHEMA, tm } from '../../helpers/db.js';
import { DEMO_SCHEMA, demoTable } from '../../../jobs/demo-schema.js';

const stack = realStack();
let chat: TestChat;
before(async () => {
  chat = await startChat();
});
after(async () => {
  await chat?.close();
});

const SECRET = 'test-signing-secret-4f1a';

function signed(body: string, opts: { secret?: string; ts?: number; signBody?: string } = {}) {
  const ts = opts.ts ?? Math.floor(Date.now() / 1000);
  const sig = createHmac('sha256', opts.secret ?? SECRET)
    .update(`v0:${ts}:${opts.signBody ?? body}`)
    .digest('hex');
  return {
    'content-type': 'application/x-www-form-urlencoded',
    'x-slack-request-timestamp': String(ts),
    'x-slack-signature': `v0=${sig}`,
  };
}

function click(user: string, action: 'rerun_approve' | 'rerun_reject', request: string): string {
  const payload = {
    type: 'block_actions',
    user: { id: user, username: user.toLowerCase(), team_id: 'T1' },
    team: { id: 'T1', domain: 'test' },
    api_app_id: 'A1',
    token: 'legacy',
    trigger_id: '1.2.3',
    container: { type: 'message', message_ts: '1.1', channel_id: 'C_APPROVALS' },
    channel: { id: 'C_APPROVALS', name: 'approvals' },
    message: { ts: '1.1', text: 'rerun' },
    response_url: `${chat.url}/response`,
    actions: [
      {
        type: 'button',
        action_id: action,
        block_id: 'rerun',
        value: request,
        action_ts: '1.2',
        text: { type: 'plain_text', text: 'x' },
      },
    ],
  };
  return `payload=${encodeURIComponent(JSON.stringify(payload))}`;
}

type AppSetup = Pick<SlackAppOptions, 'deps' | 'directory' | 'approverGroup' | 'decisionKey'>;

/** Starts the Bolt app on a free port; `post` sends a request signed with SECRET unless given headers. */
async function startApp(setup: AppSetup) {
  const port = await freePort();
  const app = await startSlackApp({
    signingSecret: SECRET,
    botToken: 'xoxb-test',
    apiUrl: chat.slackUrl,
    temporal: stack.env.client,
    db: stack.t.db,
    logger: memoryLogger(),
    port,
    ...setup,
  });
  const post = (body: string, headers: Record<string, string> = signed(body)) =>
    fetch(`http://127.0.0.1:${port}/slack/events`, { method: 'POST', body, headers });
  return { app, post };
}

/** Waits for the first message shown only to Slack user `user`. */
const ephemeralTo = (user: string, what: string) =>
  eventually(
    async () => chat.messages.find((m) => m.method === 'chat.postEphemeral' && m.user === user),
    20_000,
    what,
  );

/** Worker deps that post rerun requests to C_APPROVALS. */
const approvalDeps = (catalog: ActivityDeps['catalog']): ActivityDeps => ({
  db: stack.t.db,
  catalog,
  logger: memoryLogger(),
  now: () => new Date(),
  channels: { slack: slackProvider({ token: 'xoxb-test', apiUrl: chat.slackUrl }) },
  approvals: { slackChannel: 'C_APPROVALS', groupProofSecret: SECRET },
});

/** Runs generation 0 of `job`'s window once, as a manual run with no retries. */
function runWindow(taskQueue: string, job: string, W: { start: string; end: string }) {
  const key = `${job}/${W.start}`;
  return stack.env.client.workflow.execute('window', {
    taskQueue,
    workflowId: key,
    args: [
      {
        job,
        ...W,
        generation: 0,
        key,
        trigger: 'manual',
        policy: windowPolicy(1, 20_000),
      },
    ],
  });
}

/** The audited decisions on `request`, oldest first. */
const auditOf = (request: string) =>
  stack.t.db
    .selectFrom('approval_audit')
    .select(['actor', 'accepted'])
    .where('request', '=', request)
    .orderBy('id')
    .execute();

const EFFECT_WINDOW = { start: '2026-04-13T00:00:00Z', end: '2026-04-13T01:00:00Z' };

/**
 * A job whose window sends one email effect, alerting C_OPS, with the app started for approver bob.
 * `leaveUnknown` runs the window against an SMTP server that stores then drops the mail, so the
 * effect is left unknown and its alert carries the Resend button that `resendBy` presses.
 */
async function effectStack(job: string) {
  const smtp = await startSmtp();
  const catalog = defineCatalog([
    salesJob(job, {
      start: EFFECT_WINDOW.start,
      lateness: '0m',
      alerts: { slack: ['C_OPS'] },
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        effects: [
          {
            name: 'report',
            channel: 'email',
            request: { to: ['ops@example.test'], subject: 'report', text: 'x' },
          },
        ],
      }),
    }),
  ]);
  const deps = {
    db: stack.t.db,
    catalog,
    logger: memoryLogger(),
    now: () => new Date(),
    channels: {
      slack: slackProvider({ token: 'xoxb-test', apiUrl: chat.slackUrl }),
      email: emailProvider({
        host: '127.0.0.1',
        port: smtp.port,
        secure: false,
        rejectUnauthorized: false,
        from: 't@test',
        socketTimeoutMs: 5_000,
      }),
    },
  };
  const { app, post } = await startApp({
    deps,
    directory: { approvers: ['bob'], people: [{ name: 'bob', slack: 'UBOB' }] },
  });
  const taskQueue = uniqueQueue(job);
  const effectKey = `${job}/${EFFECT_WINDOW.start}:report`;
  const leaveUnknown = async () => {
    smtp.plan.push('store-then-drop');
    await withWorker(stack.env, taskQueue, deps, async () => {
      await assert.rejects(runWindow(taskQueue, job, EFFECT_WINDOW));
    });
    const alert = chat.messages.find(
      (m) => m.target === 'C_OPS' && JSON.stringify(m.blocks ?? '').includes('effect_resend'),
    );
    assert.ok(alert, 'the alert carries Resend and Skip buttons');
  };
  const resendBy = (user: string) =>
    post(
      click(user, 'rerun_approve', '')
        .replace(
          encodeURIComponent('"action_id":"rerun_approve"'),
          encodeURIComponent('"action_id":"effect_resend"'),
        )
        .replace(
          encodeURIComponent('"value":""'),
          encodeURIComponent(`"value":${JSON.stringify(effectKey)}`),
        ),
    );
  /** Mallory (not an approver) presses Resend: refused and audited, and nothing is resent. */
  const refusedForMallory = async () => {
    assert.equal((await resendBy('UMALLORY')).status, 200);
    await eventually(
      async () =>
        (
          await stack.t.db
            .selectFrom('approval_audit')
            .select('accepted')
            .where('request', '=', effectKey)
            .execute()
        ).length === 1
          ? true
          : undefined,
      20_000,
      'the refusal',
    );
    assert.equal(smtp.messages.length, 1, 'not resent for a non-approver');
  };
  const close = async () => {
    await app.stop();
    await smtp.close();
  };
  return { smtp, effectKey, leaveUnknown, resendBy, refusedForMallory, close };
}

test('approving a rerun from Slack', async () => {
  const job = 'slack-sales';
  const W = { start: '2026-04-12T10:00:00Z', end: '2026-04-12T11:00:00Z' };
  const catalog = defineCatalog([salesJob(job, { start: W.start, lateness: '0m' })]);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, 20));
  const deps = approvalDeps(catalog);
  chat.groups.S_APPROVERS = ['UDAVE'];
  const { app, post } = await startApp({
    deps,
    directory: {
      approvers: ['bob', 'carol'],
      people: [
        { name: 'alice', slack: 'UALICE' },
        { name: 'bob', slack: 'UBOB' },
        { name: 'carol', slack: 'UCAROL' },
        { name: 'dave', slack: 'UDAVE' },
        { name: 'mallory', slack: 'UMALLORY' },
      ],
    },
    approverGroup: 'S_APPROVERS',
  });
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      const key = `${job}/2026-04-12T10:00:00Z`;
      await runWindow(taskQueue, job, W);
      const id = `${key}/rerun-slack`;
      const handle = await stack.env.client.workflow.start('rerun', {
        taskQueue,
        workflowId: id,
        args: [
          {
            job,
            windowStart: W.start,
            reason: 'late orders',
            requestedBy: 'alice',
            approvers: ['bob', 'carol'],
            approverGroup: 'S_APPROVERS',
          },
        ],
      });

      // The request is posted with its buttons.
      const posted = await eventually(
        async () =>
          chat.messages.find(
            (m) => m.method === 'chat.postMessage' && JSON.stringify(m.blocks ?? '').includes(id),
          ),
        20_000,
        'the request message',
      );
      assert.equal(posted.target, 'C_APPROVALS');
      assert.match(posted.text, /Rerun requested\* for `slack-sales\/2026-04-12T10:00:00Z#1`/);
      assert.match(posted.text, /asked by alice: late orders/);

      // Forged, stale and tampered requests: 401, and nothing happens.
      const body = click('UBOB', 'rerun_approve', id);
      assert.equal((await post(body, signed(body, { secret: 'wrong-secret' }))).status, 401);
      assert.equal(
        (await post(body, signed(body, { ts: Math.floor(Date.now() / 1000) - 6 * 60 }))).status,
        401,
      );
      assert.equal(
        (await post(body, signed(body, { signBody: click('UBOB', 'rerun_reject', id) }))).status,
        401,
      );
      assert.equal((await handle.query<RerunState>('state')).status, 'pending');
      assert.equal(
        (await stack.t.db.selectFrom('approval_audit').selectAll().where('request', '=', id).execute())
          .length,
        0,
      );

      // Someone who is not an approver: acknowledged, refused, told, audited.
      const mallory = click('UMALLORY', 'rerun_approve', id);
      assert.equal((await post(mallory, signed(mallory))).status, 200);
      const told = await ephemeralTo('UMALLORY', 'the refusal');
      assert.match(
        told.text,
        /Not accepted: approve by mallory refused: mallory may not decide reruns \(approvers: bob, carol or members of S_APPROVERS\)/,
      );

      // Two approvers at once, one of them by user-group membership: one rerun.
      const [bob, dave] = [click('UBOB', 'rerun_approve', id), click('UDAVE', 'rerun_approve', id)];
      const answers = await Promise.all([post(bob, signed(bob)), post(dave, signed(dave))]);
      assert.deepEqual(
        answers.map((a) => a.status),
        [200, 200],
      );
      const result = (await handle.result()) as RerunResult;
      assert.equal(result.outcome, 'done');
      const audit = await eventually(
        async () => {
          const rows = await stack.t.db
            .selectFrom('approval_audit')
            .select(['actor', 'accepted', 'source', 'reason'])
            .where('request', '=', id)
            .orderBy('id')
            .execute();
          return rows.length === 3 ? rows : undefined;
        },
        20_000,
        'three audited decisions',
      );
      assert.deepEqual(
        audit.filter((a) => a.accepted).map((a) => a.actor),
        [result.decidedBy],
      );
      assert.equal(audit.filter((a) => !a.accepted).length, 2);
      // The one of bob and dave (a group member, not on the list) who lost was refused only for being second.
      const loser = audit.find((a) => !a.accepted && a.actor !== 'mallory')!;
      assert.match(
        loser.reason ?? '',
        /already approved by (bob|dave)|a decision by (bob|dave) is being checked/,
      );
      assert.ok(audit.every((a) => a.source === 'slack'));
      const gens = await stack.t.db
        .selectFrom('job_windows')
        .select('generation')
        .where('job', '=', job)
        .execute();
      assert.deepEqual(gens.map((g) => g.generation).sort(), [0, 1]);

      // The request message is updated in place with the outcome.
      const updated = await eventually(
        async () =>
          chat.messages.find(
            (m) => m.method === 'chat.update' && m.ts === posted.ts && /generation 1 processed/.test(m.text),
          ),
        20_000,
        'the updated message',
      );
      assert.match(updated.text, new RegExp(`\\*Approved\\* by ${result.decidedBy}`));
    });
  } finally {
    await app.stop();
  }
});

test('an effect left unknown is decided from the buttons of its Slack alert', async () => {
  const { smtp, effectKey, leaveUnknown, resendBy, refusedForMallory, close } =
    await effectStack('slack-effect');
  try {
    await leaveUnknown();
    await refusedForMallory();
    assert.equal((await resendBy('UBOB')).status, 200);
    // The resend's done marker is written after the mail server answered: wait for the row, not the mail.
    const row = await eventually(
      async () => {
        const r = await stack.t.db
          .selectFrom('effects')
          .select(['status', 'decided_by'])
          .where('effect_key', '=', effectKey)
          .executeTakeFirstOrThrow();
        return r.status === 'done' ? r : undefined;
      },
      20_000,
      'the approved resend done',
    );
    assert.deepEqual(row, { status: 'done', decided_by: 'bob' });
    assert.equal(smtp.messages.length, 2, 'the approved resend sent once');
    // The accepted decision is audited after it applied: wait for it.
    const audit = await eventually(
      async () => {
        const rows = await auditOf(effectKey);
        return rows.length >= 2 ? rows : undefined;
      },
      20_000,
      "bob's decision in the audit",
    );
    assert.deepEqual(audit, [
      { actor: 'UMALLORY', accepted: false },
      { actor: 'bob', accepted: true },
    ]);
  } finally {
    await close();
  }
});

test('an effect decision that applied but whose audit failed is not reported as refused', async () => {
  // The audit refuses an accepted decision by bob (a stand-in for the database failing the write).
  await sql`alter table ${tm.approval_audit} add constraint test_no_bob check (not (accepted and actor = 'bob')) not valid`.execute(
    stack.t.db,
  );
  const { smtp, effectKey, leaveUnknown, resendBy, refusedForMallory, close } =
    await effectStack('slack-effect-audit');
  try {
    await leaveUnknown();
    await refusedForMallory();
    const seen = chat.messages.length;
    assert.equal((await resendBy('UBOB')).status, 200);
    await eventually(
      async () => (smtp.messages.length === 2 ? true : undefined),
      20_000,
      'the approved resend',
    );
    // The resend happened: bob hears its outcome, and no refusal is recorded under his name.
    const told = await eventually(
      async () =>
        chat.messages.slice(seen).find((m) => m.method === 'chat.postEphemeral' && m.user === 'UBOB'),
      20_000,
      'what bob is told',
    );
    assert.doesNotMatch(told.text, /Not accepted/, told.text);
    const audit = await auditOf(effectKey);
    assert.deepEqual(audit, [{ actor: 'UMALLORY', accepted: false }]);
  } finally {
    await close();
    await sql`alter table ${tm.approval_audit} drop constraint test_no_bob`.execute(stack.t.db);
  }
});

test('one identity across the CLI and Slack: alice may not approve in Slack what she asked for in the CLI', async () => {
  // The CLI knows the jobs of the real catalog.
  const job = 'sales-hourly';
  const W = { start: '2026-04-14T10:00:00Z', end: '2026-04-14T11:00:00Z' };
  const taskQueue = uniqueQueue('slack-self');
  await insertOrders(stack.t.db, ordersBetween('slack-self', W.start, W.end, 5));
  // alice is a member of the approver group; bob is on the approvers list.
  const env = {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TIDEMARK_STATE_DIR: '/tmp/tidemark-slack-test',
    TIDEMARK_APPROVERS: 'bob=UBOB',
    TIDEMARK_PEOPLE: 'alice=UALICE',
    TIDEMARK_APPROVER_GROUP: 'S_APPROVERS',
  };
  const config = loadConfig(env);
  Object.assign(process.env, env);
  const catalog = buildCatalog(config);
  chat.groups.S_APPROVERS = ['UALICE', 'UERIN'];
  const deps = approvalDeps(catalog);
  const { app, post } = await startApp({
    deps,
    directory: directoryOf(config),
    approverGroup: 'S_APPROVERS',
  });
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      await runWindow(taskQueue, job, W);
      const out: string[] = [];
      const err: string[] = [];
      const asked = await runCli(
        ['rerun', job, '--window', W.start, '--reason', 'late orders', '--by', 'alice', '--json'],
        { out: (l) => out.push(l), err: (l) => err.push(l), json: true, tty: false },
      );
      assert.equal(asked, 0, err.join('\n'));
      const id = (JSON.parse(out.join('\n')) as { id: string }).id;

      // alice's own Slack account (a member of the approver group): refused, told, audited under her name.
      const self = click('UALICE', 'rerun_approve', id);
      assert.equal((await post(self)).status, 200);
      const told = await ephemeralTo('UALICE', 'the refusal');
      assert.match(told.text, /alice asked for this rerun and may not approve it/);
      // A Slack user with no tidemark name is nobody: refused.
      const stranger = click('UERIN', 'rerun_approve', id);
      assert.equal((await post(stranger)).status, 200);
      const toldErin = await ephemeralTo('UERIN', 'the refusal of an unnamed user');
      assert.match(toldErin.text, /Slack user UERIN has no tidemark name/);
      assert.equal(
        (await stack.env.client.workflow.getHandle(id).query<RerunState>('state')).status,
        'pending',
      );

      const bob = click('UBOB', 'rerun_approve', id);
      assert.equal((await post(bob)).status, 200);
      const result = (await stack.env.client.workflow.getHandle(id).result()) as RerunResult;
      assert.deepEqual([result.outcome, result.decidedBy], ['done', 'bob']);
      const req = await stack.t.db
        .selectFrom('rerun_requests')
        .select(['requested_by', 'decided_by'])
        .where('workflow_id', '=', id)
        .executeTakeFirstOrThrow();
      assert.deepEqual(req, { requested_by: 'alice', decided_by: 'bob' });
      const audit = await auditOf(id);
      assert.deepEqual(audit, [
        { actor: 'alice', accepted: false },
        { actor: 'UERIN', accepted: false },
        { actor: 'bob', accepted: true },
      ]);
    });
  } finally {
    await app.stop();
  }
});

test('with the decision key, a click counts only as the Slack app signed it: who, by their Slack user', async () => {
  const job = 'sales-hourly';
  const W = { start: '2026-04-21T10:00:00Z', end: '2026-04-21T11:00:00Z' };
  const taskQueue = uniqueQueue('slack-signed');
  await insertOrders(stack.t.db, ordersBetween('slack-signed', W.start, W.end, 3));
  const env = {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: stack.env.address,
    TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: taskQueue,
    TIDEMARK_STATE_DIR: '/tmp/tidemark-slack-test',
    TIDEMARK_APPROVERS: 'bob=UBOB',
    TIDEMARK_PEOPLE: 'alice=UALICE',
  };
  const config = loadConfig(env);
  Object.assign(process.env, env);
  const catalog = buildCatalog(config);
  const key = 'slack-and-workers-decision-key-0123456789';
  const base = approvalDeps(catalog);
  const deps: ActivityDeps = {
    ...base,
    approvals: {
      ...base.approvals,
      policy: { approvers: ['bob'], allowSelfApproval: false, requireProof: true },
      decisionKey: key,
    },
  };
  // One Slack app without the key (its clicks are a bare name to the workers), one with it.
  const unsigned = await startApp({ deps, directory: directoryOf(config) });
  const signing = await startApp({ deps, directory: directoryOf(config), decisionKey: key });
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      await runWindow(taskQueue, job, W);
      // Asked on the page by alice, signed in (workers holding the key take only signed requests).
      const handle = await requestRerun(
        stack.env.client,
        loadConfig({ ...env, TIDEMARK_DECISION_KEY: key }),
        {
          job: catalog.get(job),
          windowStart: new Date(W.start),
          reason: 'late orders',
          requestedBy: 'alice',
          now: new Date(),
          requester: {
            subject: 'idp|alice',
            displayName: 'Alice',
            roles: ['viewer', 'operator'],
            credential: 'session:0123456789abcdef',
          },
        },
      );
      const id = handle.workflowId;
      await requestState(stack.env.client, id);
      // Alice asked on the page; her own Slack account is the same person: self-approval, refused.
      const before = chat.messages.length;
      assert.equal((await signing.post(click('UALICE', 'rerun_approve', id))).status, 200);
      const toldAlice = await eventually(
        async () =>
          chat.messages.slice(before).find((m) => m.method === 'chat.postEphemeral' && m.user === 'UALICE'),
        20_000,
        "the refusal of alice's own approval",
      );
      assert.match(toldAlice.text, /alice asked for this rerun and may not approve it/);
      const seen = chat.messages.length;
      assert.equal((await unsigned.post(click('UBOB', 'rerun_approve', id))).status, 200);
      const told = await eventually(
        async () =>
          chat.messages.slice(seen).find((m) => m.method === 'chat.postEphemeral' && m.user === 'UBOB'),
        20_000,
        'the refusal of an unsigned click',
      );
      assert.match(told.text, /carries no valid signature of the page or the Slack app/);
      assert.equal(
        (await stack.env.client.workflow.getHandle(id).query<RerunState>('state')).status,
        'pending',
      );
      assert.equal((await signing.post(click('UBOB', 'rerun_approve', id))).status, 200);
      const result = (await stack.env.client.workflow.getHandle(id).result()) as RerunResult;
      assert.deepEqual([result.outcome, result.decidedBy], ['done', 'bob']);
      const audit = await stack.t.db
        .selectFrom('approval_audit')
        .select(['actor', 'accepted', 'subject', 'credential'])
        .where('request', '=', id)
        .orderBy('id')
        .execute();
      assert.deepEqual(audit, [
        { actor: 'alice', accepted: false, subject: 'slack:UALICE', credential: 'slack:UALICE' },
        { actor: 'bob', accepted: false, subject: 'slack:UBOB', credential: 'slack:UBOB' },
        { actor: 'bob', accepted: true, subject: 'slack:UBOB', credential: 'slack:UBOB' },
      ]);
    });
  } finally {
    await unsigned.app.stop();
    await signing.app.stop();
  }
});

test('a rerun request in Slack carries the preview (bounded, escaped); approving it from Slack applies that change', async () => {
  const job = 'slack-preview';
  const W = { start: '2026-04-15T10:00:00Z', end: '2026-04-15T11:00:00Z' };
  const catalog = defineCatalog([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      writes: [
        { table: demoTable('daily_sales'), key: ['job', 'day'] },
        { table: `${SCHEMA}.quarantine`, key: ['job', 'window_start', 'generation', 'record_key'] },
      ],
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  await insertOrders(stack.t.db, ordersBetween(job, W.start, W.end, 5));
  const deps = approvalDeps(catalog);
  const { app, post } = await startApp({
    deps,
    directory: {
      approvers: ['bob'],
      people: [
        { name: 'alice', slack: 'UALICE' },
        { name: 'bob', slack: 'UBOB' },
      ],
    },
  });
  try {
    await withWorker(stack.env, taskQueue, deps, async () => {
      await runWindow(taskQueue, job, W);
      // A good late order, and a bad one whose key would be a mention if it reached Slack as it is.
      await insertOrders(stack.t.db, [
        { key: `${job}-late`, at: '2026-04-15T10:59:00Z', amount: 40 },
        { key: '<!channel> & co', at: '2026-04-15T10:59:30Z', amount: null },
      ]);
      const handle = await stack.env.client.workflow.start('rerun', {
        taskQueue,
        workflowId: `${job}/${W.start}/rerun-1`,
        args: [
          { job, windowStart: W.start, reason: 'late orders', requestedBy: 'alice', approvers: ['bob'] },
        ],
      });
      const message = await eventually(
        async () =>
          chat.messages.find(
            (m) =>
              m.method === 'chat.postMessage' &&
              m.target === 'C_APPROVALS' &&
              m.text.includes(`Rerun requested* for \`${job}/`),
          ),
        20_000,
        'the request message',
      );
      const state = await handle.query<RerunState>('state');
      const p = state.preview!;
      assert.match(message.text, /```preview of generation 1 \(replaces generation 0\)/);
      assert.match(
        message.text,
        /daily_sales: 1 changed\n {2}~ job=slack-preview day=2026-04-15: order_count 5 -&gt; 6, total \S+ -&gt; \S+/,
      );
      // The quarantine's id and created_at are the database's to assign at the run: not shown.
      assert.match(
        message.text,
        /quarantine: 1 added\n {2}\+ job=slack-preview .*record_key=&lt;!channel&gt; &amp; co: reason amount is missing, payload \{/,
      );
      assert.doesNotMatch(message.text, /<!channel>/);
      assert.ok(message.text.length < 3_000, 'within what a Slack section shows');
      assert.deepEqual(
        JSON.stringify(message.blocks).includes('rerun_approve'),
        true,
        'the preview sits next to Approve / Reject',
      );

      // One more late order lands before bob clicks: the preview in the message is no longer what
      // a rerun would do. The click is refused with the new preview; the next click approves that.
      await insertOrders(stack.t.db, [{ key: `${job}-later`, at: '2026-04-15T10:59:45Z', amount: 2 }]);
      assert.equal((await post(click('UBOB', 'rerun_approve', handle.workflowId))).status, 200);
      const told = await eventually(
        async () =>
          chat.messages.find(
            (m) => m.method === 'chat.postEphemeral' && m.user === 'UBOB' && /data changed/.test(m.text),
          ),
        20_000,
        'the refusal of a stale preview',
      );
      assert.match(
        told.text,
        /the data changed since the preview shown with the request.*order_count 5 -&gt; 7/,
      );
      // The refusal quotes the data (a record key here): escaped, it pings nobody and dresses no link.
      assert.doesNotMatch(told.text, /<!channel>/);
      assert.equal((await post(click('UBOB', 'rerun_approve', handle.workflowId))).status, 200);
      const result = (await handle.result()) as RerunResult;
      assert.deepEqual([result.outcome, result.decidedBy], ['done', 'bob']);
      const now = (await handle.query<RerunState>('state')).preview!;
      assert.notEqual(now.digest, p.digest);
      const day = await stack.t.db
        .withSchema(DEMO_SCHEMA)
        .selectFrom('daily_sales')
        .select(['order_count', sql<string>`total::text`.as('total')])
        .where('job', '=', job)
        .executeTakeFirstOrThrow();
      const after = now.tables![0]!.rows[0]!.after!;
      assert.deepEqual([String(day.order_count), day.total], ['7', after.total]);
      assert.equal(after.order_count, '7');
      // The message, updated in place, shows the preview that was approved.
      const updated = await eventually(
        async () =>
          chat.messages.find(
            (m) =>
              m.method === 'chat.update' && m.text.includes(`${job}/`) && /\*Approved\* by bob/.test(m.text),
          ),
        20_000,
        'the updated message',
      );
      assert.match(updated.text, /order_count 5 -&gt; 7/);
    });
  } finally {
    await app.stop();
  }
});

test("a rejection's note and who made it reach the request's Slack message as text: no ping, no dressed link", async () => {
  const job = 'slack-note';
  const W = { start: '2026-04-13T10:00:00Z', end: '2026-04-13T11:00:00Z' };
  // An effect named from the data: its name is listed in the request as what will repeat.
  const catalog = defineCatalog([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        effects: [
          {
            name: 'thanks <!here> <https://evil.test/x|click>',
            channel: 'slack',
            request: { channel: 'C_OPS', text: 'thanks' },
          },
        ],
      }),
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  const deps = approvalDeps(catalog);
  await withWorker(stack.env, taskQueue, deps, async () => {
    await runWindow(taskQueue, job, W);
    const id = `${job}/${W.start}/rerun-note`;
    const handle = await stack.env.client.workflow.start('rerun', {
      taskQueue,
      workflowId: id,
      args: [{ job, windowStart: W.start, reason: 'late orders', requestedBy: 'alice', approvers: ['bob'] }],
    });
    const posted = await eventually(
      async () =>
        chat.messages.find(
          (m) => m.method === 'chat.postMessage' && JSON.stringify(m.blocks ?? '').includes(id),
        ),
      20_000,
      'the request message',
    );
    assert.doesNotMatch(posted.text, /<!here>|<https:/, 'what will repeat is escaped');
    assert.match(posted.text, /will repeat: thanks &lt;!here&gt;/);
    await handle.executeUpdate('decide', {
      args: [
        {
          decision: 'reject',
          by: 'bob',
          note: '<!channel> pay here: <https://evil.test/pay|invoice>',
          source: 'cli',
        },
      ],
    });
    await handle.result();
    const updated = await eventually(
      async () =>
        chat.messages.find(
          (m) => m.method === 'chat.update' && m.ts === posted.ts && /Rejected/.test(m.text),
        ),
      20_000,
      'the updated message',
    );
    assert.doesNotMatch(updated.text, /<!channel>|<https:/);
    assert.match(
      updated.text,
      /\*Rejected\* by bob: &lt;!channel&gt; pay here: &lt;https:\/\/evil\.test\/pay\|invoice&gt;/,
    );
  });
});
