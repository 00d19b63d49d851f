// Review of issue 13's payload codec (hostile probes on a real Temporal dev server): what the codec
// leaves behind that a key rotation or a keyless process trips over.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { Client } from '@temporalio/client';
import { temporalDataConverter } from '../../codec/index.js';
import { defineCatalog } from '../../schedules/job.js';
import { scheduleIdOf, syncSchedules, WATCH_SCHEDULE_ID } from '../../schedules/sync.js';
import { salesJob } from '../helpers/jobs.js';
import { realStack } from '../helpers/temporal.js';

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
  const payloads = [...(start?.input?.payloads ?? []), ...Object.values(start?.memo?.fields ?? {})];
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

  // Encryption turned on: sync (re)writes the schedules with k1.
  const on = await syncSchedules(clientWith(k1), catalog, { taskQueue, apply: true });
  assert.deepEqual(on.failed, []);
  for (const id of ids) assert.deepEqual([...new Set(await scheduleKeyIds(id))], ['k1'], id);

  // Rotation: k2 first, k1 kept: sync rewrites them with k2, so that k1 can be dropped.
  const rotated = await syncSchedules(clientWith(`${k2},${k1}`), catalog, { taskQueue, apply: true });
  assert.deepEqual(rotated.failed, []);
  assert.deepEqual(rotated.update.sort(), [...ids].sort());
  for (const id of ids) assert.deepEqual([...new Set(await scheduleKeyIds(id))], ['k2'], id);

  // Then a sync with k2 alone finds nothing to change, and the schedule reads fine with k2 only.
  const after = await syncSchedules(clientWith(k2), catalog, { taskQueue, apply: true });
  assert.deepEqual([after.failed, after.update, after.create], [[], [], []]);
  const described = await clientWith(k2).schedule.getHandle(ids[0]!).describe();
  assert.equal(described.action.type, 'startWorkflow');
  assert.deepEqual(described.action.type === 'startWorkflow' && described.action.args, [
    { job: 'rot-sched' },
  ]);
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
