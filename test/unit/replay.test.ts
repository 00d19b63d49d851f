// Recorded histories of every workflow type (test/histories/, scripts/record-histories.ts) replay
// against the current workflow code, bundled and converted as the real worker does: a change that
// would break a running workflow fails here. Re-record only when a change is intentional.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import {
  bundleWorkflowCode,
  DefaultLogger,
  type InjectedSinks,
  Runtime,
  Worker,
  type ReplayWorkerOptions,
} from '@temporalio/worker';
import {
  decodeArrayFromPayloads,
  loadDataConverter,
} from '@temporalio/common/lib/internal-non-workflow/index.js';
import { DeterminismViolationError } from '@temporalio/workflow';
import { workflowInterceptorModules } from '../../workers/tracing.js';
import { workflowsPath } from '../../workers/create-worker.js';
import type { ActivityInputSinks } from '../fixtures/activity-inputs-interceptor.js';
import * as workflows from '../../workflows/index.js';
import { ENCRYPTED_ENCODING, payloadCodecOf } from '../../codec/index.js';
import { allText, historyFromFile, payloadsIn } from '../helpers/history.js';
import {
  encryptedHistoriesDir,
  encryptingReplayOptions,
  historiesDir,
  historyNames,
  oldVersionFiles,
  RECORDING_SECRETS,
  REPLAY_PAYLOAD_KEYS,
  replayOptions,
  secretsIn,
} from '../helpers/replay.js';

Runtime.install({ logger: new DefaultLogger('WARN') });

const fileOf = (name: string) => new URL(`${name}.json`, historiesDir);

async function recorded() {
  const names = await historyNames();
  return await Promise.all(
    names.map(async (name) => ({ name, workflowId: name, history: await historyFromFile(fileOf(name)) })),
  );
}

/** The histories recorded with payload encryption on (test/histories/encrypted/). */
async function recordedEncrypted() {
  return await Promise.all(
    (await historyNames(encryptedHistoriesDir)).map(async (name) => ({
      name,
      workflowId: `encrypted/${name}`,
      history: await historyFromFile(new URL(`${name}.json`, encryptedHistoriesDir)),
    })),
  );
}

const typeOf = (h: Awaited<ReturnType<typeof recorded>>[number]) =>
  h.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name;

test('every workflow type exported by workflows/index.ts has a recorded history', async () => {
  const types = Object.entries(workflows)
    .filter(([, v]) => typeof v === 'function')
    .map(([name]) => name)
    .sort();
  assert.deepEqual(types, ['backfill', 'rerun', 'rerunPreview', 'tick', 'watch', 'window']);
  const covered = new Set((await recorded()).map(typeOf));
  assert.deepEqual(
    types.filter((t) => !covered.has(t)),
    [],
    'workflow types without a recorded history: add a scenario to scripts/record-histories.ts',
  );
});

test('the queries and updates of running workflows keep their names (replay cannot see a rename)', () => {
  // A query is not in a history, so renaming one replays fine, yet callers of the other version (a
  // web, CLI or Slack host not rolled yet, a script) get "unknown query" from every running run.
  // An update's rename fails replay only for histories that hold one. Add a name; never rename one.
  const messages = Object.fromEntries(
    Object.entries(workflows)
      .filter(([, v]) => typeof v === 'object' && v !== null && 'name' in v && 'type' in v)
      .map(([k, v]) => [k, `${(v as { type: string }).type} ${(v as { name: string }).name}`]),
  );
  assert.deepEqual(messages, {
    decideRerun: 'update decide',
    progressQuery: 'query progress',
    rerunState: 'query state',
  });
});

test('the recorded histories hold no secret, in their text or their payloads', async () => {
  const codec = payloadCodecOf(REPLAY_PAYLOAD_KEYS)!;
  const encrypted = (await historyNames(encryptedHistoriesDir)).map(
    (name) => new URL(`${name}.json`, encryptedHistoriesDir),
  );
  for (const url of [...(await historyNames()).map(fileOf), ...(await oldVersionFiles()), ...encrypted]) {
    // Payload data is base64 in the file: searched decoded too, and decrypted.
    const history = await historyFromFile(url);
    const decrypted = allText(await codec.decode(payloadsIn(history)));
    const text = `${await readFile(url, 'utf8')}\n${allText(history)}\n${decrypted}`;
    assert.deepEqual(secretsIn(text), [], url.pathname);
  }
  assert.deepEqual(secretsIn(`{"data":"x"}\n${RECORDING_SECRETS.smtpPassword}`), [
    RECORDING_SECRETS.smtpPassword,
  ]);
});

async function allHistories() {
  const old = await Promise.all(
    (await oldVersionFiles()).map(async (url) => ({
      workflowId: url.pathname.split('/').pop()!,
      history: await historyFromFile(url),
    })),
  );
  assert.ok(old.length >= 9, `only ${old.length} earlier versions' histories in test/fixtures`);
  return [...(await recorded()), ...old];
}

/** The replay failures of `histories` with `options`, one line each. */
async function replayFailures(
  options: ReplayWorkerOptions,
  histories: Awaited<ReturnType<typeof allHistories>>,
): Promise<string[]> {
  const failures: string[] = [];
  let replayed = 0;
  for await (const r of Worker.runReplayHistories(options, histories)) {
    replayed++;
    if (r.error) failures.push(`${r.workflowId}: ${r.error.name}: ${r.error.message}`);
  }
  assert.equal(replayed, histories.length);
  return failures;
}

test('every recorded history, of this version and earlier ones, replays against the current workflow code', async () => {
  const histories = await allHistories();
  assert.ok(histories.length >= 21, `only ${histories.length} histories`);
  assert.deepEqual(await replayFailures(await replayOptions(), histories), []);
});

test('a worker that turns payload encryption on replays the runs written in plain', async () => {
  assert.deepEqual(await replayFailures(await encryptingReplayOptions(), await allHistories()), []);
});

test('the histories recorded with payload encryption on (as in production) replay through the codec', async () => {
  const histories = await recordedEncrypted();
  const plain = (await historyNames()).sort();
  assert.deepEqual(
    histories.map((h) => h.name),
    plain,
    'every scenario recorded encrypted too: npm run record-histories -- --encrypted',
  );
  const isEncrypted = (p: { metadata?: Record<string, Uint8Array> | null }) =>
    Buffer.from(p.metadata?.encoding ?? []).toString() === ENCRYPTED_ENCODING;
  for (const h of histories) {
    const payloads = payloadsIn(h.history, { skipCoreMarkers: true });
    assert.ok(payloads.length > 0, h.name);
    assert.deepEqual(
      payloads.filter((p) => !isEncrypted(p)),
      [],
      `${h.name}: every payload is encrypted, as a production history's (replay decodes them)`,
    );
  }
  assert.deepEqual(await replayFailures(await encryptingReplayOptions(), histories), []);
});

test('replayed from their recorded inputs, the runs schedule their activities with the recorded arguments', async () => {
  // Replay compares the kind of each command, not its arguments: a workflow input read differently
  // (a backfill's continue-as-new input with \`cursor\` renamed replays clean, and every running
  // backfill would start over from \`from\`) shows only here. An intended change of an activity's
  // arguments re-records the histories (CONTRIBUTING.md, "Re-recording").
  const options = await replayOptions();
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [
      ...workflowInterceptorModules(),
      fileURLToPath(new URL('../fixtures/activity-inputs-interceptor.ts', import.meta.url)),
    ],
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
  const converter = loadDataConverter(options.dataConverter);
  const differences: string[] = [];
  for (const { name, history } of await recorded()) {
    const sent: string[] = [];
    const sinks: InjectedSinks<ActivityInputSinks> = {
      scheduled: {
        activity: {
          fn: (_info, type, args) => void sent.push(JSON.stringify([type, args])),
          callDuringReplay: true,
        },
      },
    };
    const recordedArgs = await Promise.all(
      (history.events ?? [])
        .map((e) => e.activityTaskScheduledEventAttributes)
        .filter((a) => !!a)
        .map(async (a) =>
          JSON.stringify([
            a.activityType?.name,
            await decodeArrayFromPayloads(converter, a.input?.payloads ?? undefined),
          ]),
        ),
    );
    // The run's own id (activities are sent it), as the recorder's worker saw it.
    const id = /"workflowId":"([^"]+)"/.exec(recordedArgs.join(' '))?.[1] ?? name;
    await Worker.runReplayHistory({ ...options, workflowBundle, sinks }, history, id);
    if (JSON.stringify(sent) !== JSON.stringify(recordedArgs))
      differences.push(`${name}: sent ${sent.join(' ')}\n  recorded ${recordedArgs.join(' ')}`);
  }
  assert.deepEqual(differences, []);
});

test('a workflow changed in a way that breaks running workflows fails to replay their histories', async () => {
  const changed = await bundleWorkflowCode({
    workflowsPath: fileURLToPath(new URL('../fixtures/changed-workflows.ts', import.meta.url)),
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
  });
  const options = { ...(await replayOptions()), workflowBundle: changed };
  // The unchanged tick still replays with this bundle: the failure below is the window's change.
  await Worker.runReplayHistory(options, await historyFromFile(fileOf('tick')), 'tick');
  await assert.rejects(
    Worker.runReplayHistory(options, await historyFromFile(fileOf('window-effects')), 'window-effects'),
    (err: unknown) => err instanceof DeterminismViolationError,
  );
});
