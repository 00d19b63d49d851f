// Records the workflow histories the replay test (test/unit/replay.test.ts) runs against the
// current code: its own Temporal dev server and database, the real workers with a small test
// catalog, and one scenario per workflow shape. Run it when a workflow change is intentional
// (`npm run record-histories`); keep the histories of the old version as old-version files.
// `-- --encrypted` records the same scenarios with payload encryption on (client and workers, as in
// production) into test/histories/encrypted/, with the test key REPLAY_PAYLOAD_KEYS.
import { mkdir, writeFile } from 'node:fs/promises';
import { Client, type WorkflowHandle } from '@temporalio/client';
import proto, { type temporal } from '@temporalio/proto';
import { ENCRYPTED_ENCODING, payloadCodecOf, temporalDataConverter } from '../codec/index.js';
import { defineCatalog } from '../schedules/define.js';
import { createTestDb } from '../test/helpers/db.js';
import { depsWithChannels, summaryWithMail } from '../test/helpers/effects.js';
import { startChat } from '../test/helpers/chat.js';
import { insertOrders, ordersBetween, salesJob } from '../test/helpers/jobs.js';
import { allText, historyToJson, payloadsIn } from '../test/helpers/history.js';
import {
  encryptedHistoriesDir,
  historiesDir,
  RECORDING_SECRETS,
  REPLAY_PAYLOAD_KEYS,
  secretsIn,
} from '../test/helpers/replay.js';
import { startSmtp } from '../test/helpers/smtp.js';
import { eventually, startTemporal, uniqueQueue } from '../test/helpers/temporal.js';
import { bundleWorkflows, createWorkers, runWorkers } from '../workers/create-worker.js';
import type { RerunState } from '../contract/workflows.js';

type Event = temporal.api.history.v1.IHistoryEvent;
const { EventType } = proto.temporal.api.enums.v1;

const T0 = '2026-01-05T00:00:00Z';
// Window keys carry their start as the planner writes it: ISO without milliseconds.
const hour = (n: number) => new Date(Date.parse(T0) + n * 3_600_000).toISOString().replace('.000Z', 'Z');
const hh = (h: number) => `${String(((h % 24) + 24) % 24).padStart(2, '0')}:00`;
const policy = {
  retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 20_000,
};

/** The history as `temporal workflow show -o json` writes it; worker identities (host, pid) made constant. */
function historyText(history: temporal.api.history.v1.IHistory): string {
  const json = historyToJson(history);
  const scrub = (v: unknown): void => {
    if (!v || typeof v !== 'object') return;
    for (const [k, x] of Object.entries(v)) {
      if (k === 'identity' && typeof x === 'string') (v as Record<string, unknown>)[k] = 'recorder';
      else scrub(x);
    }
  };
  scrub(json);
  return `${JSON.stringify(json, null, 2)}\n`;
}

async function save(name: string, handle: WorkflowHandle): Promise<void> {
  const history = await handle.fetchHistory();
  const text = historyText(history);
  // Payload data is base64 in the text: searched decoded too (and decrypted when encrypted).
  const payloads = payloadsIn(history);
  const decrypted = codec ? allText(await codec.decode(payloads)) : '';
  const secrets = secretsIn(`${text}\n${allText(history)}\n${decrypted}`);
  if (secrets.length) throw new Error(`the history ${name} holds ${secrets.join(', ')}: not saved`);
  const isEncrypted = (p: (typeof payloads)[number]) =>
    Buffer.from(p.metadata?.encoding ?? []).toString() === ENCRYPTED_ENCODING;
  if (encrypted && !payloads.some(isEncrypted)) throw new Error(`the history ${name} is not encrypted`);
  await writeFile(new URL(`${name}.json`, outDir), text);
  console.log(`saved ${new URL(`${name}.json`, outDir).pathname} (${text.length} bytes)`);
}

/** Waits until the run's history holds an event that `match` accepts. */
async function untilEvent(handle: WorkflowHandle, what: string, match: (e: Event) => boolean): Promise<void> {
  await eventually(
    async () => ((await handle.fetchHistory()).events?.some(match) ? true : undefined),
    60_000,
    what,
  );
}

const encrypted = process.argv.includes('--encrypted');
const outDir = encrypted ? encryptedHistoriesDir : historiesDir;
const keysEnv = encrypted ? REPLAY_PAYLOAD_KEYS : {};
const codec = payloadCodecOf(keysEnv);

const isType = (type: temporal.api.enums.v1.EventType) => (e: Event) => e.eventType === type;

async function main(): Promise<void> {
  await mkdir(outDir, { recursive: true });
  const [env, t, smtp, chat] = await Promise.all([
    startTemporal(),
    createTestDb(),
    startSmtp({ requireAuth: true }),
    startChat(),
  ]);
  const now = new Date();
  const mail = 'replay-mail';
  const paged = 'replay-backfill';
  const batched = 'replay-batched';
  const nightly = 'replay-nightly';
  const failing = 'replay-failing';
  const hours = { from: hh(now.getUTCHours() + 3), to: hh(now.getUTCHours() + 4) };
  const catalog = defineCatalog([
    salesJob(mail, { start: T0, lateness: '0m', handler: summaryWithMail() }),
    salesJob(paged, { start: T0, lateness: '0m' }),
    salesJob(batched, { start: T0, lateness: '0m' }),
    salesJob(nightly, { start: T0, lateness: '0m', allowedHours: hours }),
    salesJob(failing, {
      start: T0,
      lateness: '0m',
      handler: () => Promise.reject(new Error('the source is unreachable (recorded failure)')),
    }),
  ]);
  for (const job of [mail, paged, batched, nightly])
    await insertOrders(t.db, ordersBetween(job, hour(0), hour(6), 12));
  const dataConverter = temporalDataConverter(keysEnv);
  const client = encrypted
    ? new Client({ connection: env.connection, namespace: env.namespace ?? 'default', dataConverter })
    : env.client;
  const taskQueue = uniqueQueue('replay');
  const watchQueue = `${taskQueue}-watch`;
  const deps = {
    ...depsWithChannels(t.db, catalog, smtp, chat, { secrets: RECORDING_SECRETS }),
    temporal: { client, taskQueue },
  };
  const workers = await createWorkers({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueues: [taskQueue, watchQueue],
    deps,
    bundle: await bundleWorkflows({ encryptFailures: encrypted }),
    dataConverter,
    shutdownGraceTime: '1s',
  });
  const running = runWorkers(workers);
  try {
    // tick: two closed windows of a job whose windows send an e-mail each (through the effect guard).
    const tick = await client.workflow.start('tick', {
      taskQueue,
      workflowId: `${mail}/tick-${hour(2)}`,
      args: [{ job: mail, now: hour(2) }],
    });
    await tick.result();
    await save('tick', tick);
    const first = client.workflow.getHandle(`${mail}/${hour(0)}`);
    await client.workflow.getHandle(`${mail}/${hour(1)}`).result();
    await first.result();
    await save('window-effects', first);

    // backfill: five windows, two a page, so it continues as new twice.
    const backfill = await client.workflow.start('backfill', {
      taskQueue,
      workflowId: `${paged}/backfill`,
      args: [{ job: paged, from: hour(0), to: hour(5), pageSize: 2, concurrency: 2 }],
    });
    await client.workflow.getHandle(backfill.workflowId).result();
    await save(
      'backfill-continued',
      client.workflow.getHandle(backfill.workflowId, backfill.firstExecutionRunId),
    );
    await save('backfill-last-page', client.workflow.getHandle(backfill.workflowId));

    // batched backfill: batches of two windows in one activity each, two a page.
    const batchedRun = await client.workflow.start('backfill', {
      taskQueue,
      workflowId: `${batched}/backfill`,
      args: [{ job: batched, from: hour(0), to: hour(4), pageSize: 2, batch: 2, concurrency: 1 }],
    });
    await client.workflow.getHandle(batchedRun.workflowId).result();
    await save(
      'backfill-batched',
      client.workflow.getHandle(batchedRun.workflowId, batchedRun.firstExecutionRunId),
    );

    // rerunPreview: what a rerun of the first window would change.
    const preview = await client.workflow.start('rerunPreview', {
      taskQueue,
      workflowId: `${mail}/${hour(0)}/preview`,
      args: [{ job: mail, windowStart: hour(0), timeoutMs: 20_000 }],
    });
    await preview.result();
    await save('rerun-preview', preview);

    // rerun approved: alice asks, bob approves, generation 1 runs (its e-mail again) and ends.
    const approved = await client.workflow.start('rerun', {
      taskQueue,
      workflowId: `${mail}/${hour(0)}/rerun-1`,
      args: [
        {
          job: mail,
          windowStart: hour(0),
          reason: 'late orders',
          requestedBy: 'alice',
          approvers: ['bob'],
          timeoutMs: 600_000,
        },
      ],
    });
    await untilRequested(approved);
    await approved.executeUpdate('decide', { args: [{ decision: 'approve', by: 'bob', source: 'web' }] });
    await approved.result();
    await save('rerun-approved', approved);
    await save('window-rerun', client.workflow.getHandle(`${mail}/${hour(0)}#1`));

    // rerun waiting for approval (open): its request recorded, its preview computed.
    const waiting = await client.workflow.start('rerun', {
      taskQueue,
      workflowId: `${mail}/${hour(1)}/rerun-1`,
      args: [
        {
          job: mail,
          windowStart: hour(1),
          reason: 'late orders',
          requestedBy: 'alice',
          approvers: ['bob'],
          timeoutMs: 600_000,
        },
      ],
    });
    await untilRequested(waiting);
    await untilEvent(waiting, 'the rerun to wait for a decision', isType(EventType.EVENT_TYPE_TIMER_STARTED));
    await save('rerun-waiting', waiting);
    await waiting.terminate('recorded');

    // window waiting for its allowed hours (open): asleep on a durable timer.
    const sleeping = await client.workflow.start('window', {
      taskQueue,
      workflowId: `${nightly}/${hour(0)}`,
      args: [
        {
          job: nightly,
          start: hour(0),
          end: hour(1),
          generation: 0,
          key: `${nightly}/${hour(0)}`,
          trigger: 'manual',
          policy: { ...policy, allowedHours: { ...hours, timezone: 'UTC' } },
        },
      ],
    });
    await untilEvent(
      sleeping,
      'the window to sleep until its allowed hours',
      isType(EventType.EVENT_TYPE_TIMER_STARTED),
    );
    await save('window-allowed-hours', sleeping);
    await sleeping.terminate('recorded');

    // window failing: its attempts fail, it alerts (an incident) and ends failed.
    const failed = await client.workflow.start('window', {
      taskQueue,
      workflowId: `${failing}/${hour(0)}`,
      args: [
        {
          job: failing,
          start: hour(0),
          end: hour(1),
          generation: 0,
          key: `${failing}/${hour(0)}`,
          trigger: 'manual',
          policy,
        },
      ],
    });
    await failed.result().then(
      () => Promise.reject(new Error('the failing window succeeded')),
      () => undefined,
    );
    await save('window-failed', failed);

    // watch: every job's lag measured (the nightly job is behind), alerts driven.
    const watch = await client.workflow.start('watch', {
      taskQueue: watchQueue,
      workflowId: 'tidemark:watch-recorded',
      args: [{ now: hour(6) }],
    });
    await watch.result();
    await save('watch', watch);
  } finally {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    await running.catch(() => undefined);
    await Promise.all([t.drop(), smtp.close(), chat.close()]);
    await env.teardown();
  }
}

/** Until the rerun's request is recorded and its preview computed (approving before is refused). */
async function untilRequested(handle: WorkflowHandle): Promise<void> {
  await eventually(
    async () => {
      const s = await handle.query<RerunState>('state');
      return s.request && !s.previewing ? true : undefined;
    },
    60_000,
    `the request of ${handle.workflowId}`,
  );
}

await main();
