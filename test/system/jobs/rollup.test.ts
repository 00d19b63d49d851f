// The nightly batch job kind end to end: a worker killed in the middle of a chunked rollup
// resumes at the last committed chunk and the result equals an uninterrupted run; the work
// waits for its allowed hours.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { DateTime } from 'luxon';
import { memoryLogger } from '../../../activities/logger.js';
import { eventRollup } from '../../../jobs/event-rollup.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowRunResult } from '../../../contract/workflows.js';
import { spawnWorker, workerProcessEnv } from '../../helpers/processes.js';
import { realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';
import { demo, DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

const stack = realStack();
const policy = (
  heartbeatTimeoutMs?: number,
  allowedHours?: { from: string; to: string; timezone: string },
) => ({
  retry: { maximumAttempts: 5, initialInterval: '100ms', maximumInterval: '1s', backoffCoefficient: 2 },
  startToCloseTimeoutMs: 120_000,
  ...(heartbeatTimeoutMs ? { heartbeatTimeoutMs } : {}),
  ...(allowedHours ? { allowedHours } : {}),
});

async function stats(job: string): Promise<string[]> {
  const rows = await stack.t.db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('daily_event_stats')
    .select(['day', 'kind', 'events', 'total'])
    .where('job', '=', job)
    .orderBy('day')
    .orderBy('kind')
    .execute();
  return rows.map((r) => `${r.day} ${r.kind} ${r.events} ${r.total}`);
}

test('a worker killed after chunk 4 of 10: the next attempt resumes at chunk 5, the result equals an uninterrupted run', async () => {
  await sql`insert into ${demo.raw_events} (occurred_at, kind, value)
    select timestamptz '2026-06-10T00:00:00Z' + (n * interval '8.64 seconds'), (array['view', 'click', 'buy'])[1 + n % 3], (n % 97) / 4.0
      from generate_series(0, 9999) n`.execute(stack.t.db);
  const window = { start: '2026-06-10T00:00:00Z', end: '2026-06-11T00:00:00Z' };
  const taskQueue = uniqueQueue('rollup');
  const job = 'rollup-killed';
  const workerEnv = (killAfterChunk?: number) =>
    workerProcessEnv(stack, taskQueue, {
      name: job,
      grid: 'day',
      start: window.start,
      holdMs: 0,
      rollup: {
        chunkSize: 1_000,
        heartbeatTimeout: '2s',
        ...(killAfterChunk !== undefined ? { killAfterChunk } : {}),
      },
    });
  const doomed = await spawnWorker('doomed', workerEnv(3));
  const key = `${job}/2026-06-10T00:00:00Z`;
  const run = stack.env.client.workflow.execute('window', {
    taskQueue,
    workflowId: key,
    args: [{ job, ...window, generation: 0, key, trigger: 'manual', policy: policy(2_000) }],
  }) as Promise<WindowRunResult>;
  await new Promise<void>((r) => doomed.child.once('exit', () => r()));
  assert.equal(doomed.child.signalCode, 'SIGKILL');
  assert.equal(doomed.output().match(/CHUNK /g)?.length, 4);
  const checkpoints = await stack.t.db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('batch_checkpoints')
    .select('chunk')
    .where('window_key', '=', key)
    .orderBy('chunk')
    .execute();
  assert.deepEqual(
    checkpoints.map((c) => c.chunk),
    [0, 1, 2, 3],
  );
  const survivor = await spawnWorker('survivor', workerEnv());
  try {
    const result = await run;
    assert.equal(result.outcome, 'processed');
    assert.deepEqual(result.counts, { input: 10_000, applied: 10_000, quarantined: 0 });
  } finally {
    await survivor.stop();
  }
  assert.match(survivor.output(), /resuming: 4 of 10 chunks already committed/);
  assert.equal(survivor.output().match(/CHUNK /g)?.length, 6, 'only the remaining chunks');

  // Independent computation straight from the raw events, and an uninterrupted run.
  const direct = await sql<{ line: string }>`
    select day || ' ' || kind || ' ' || count(*) || ' ' || sum(value)::numeric(18, 2) as line
      from (select (occurred_at at time zone 'UTC')::date::text as day, kind, value from ${demo.raw_events}) e group by day, kind order by day, kind`.execute(
    stack.t.db,
  );
  assert.deepEqual(
    await stats(job),
    direct.rows.map((r) => r.line),
  );
  const clean = 'rollup-clean';
  const catalog = defineCatalog([
    eventRollup({ name: clean, grid: 'day', start: window.start, chunkSize: 1_000 }),
  ]);
  const q2 = uniqueQueue('rollup-clean');
  await withWorker(
    stack.env,
    q2,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const once = () =>
        stack.env.client.workflow.execute('window', {
          taskQueue: q2,
          workflowId: `${clean}/w`,
          args: [
            {
              job: clean,
              ...window,
              generation: 0,
              key: `${clean}/2026-06-10T00:00:00Z`,
              trigger: 'manual',
              policy: policy(),
            },
          ],
        }) as Promise<WindowRunResult>;
      assert.equal((await once()).outcome, 'processed');
      assert.equal((await once()).outcome, 'already-done', 'a second run changes nothing');
    },
  );
  assert.deepEqual(await stats(clean), await stats(job));
  assert.equal(
    (await stack.t.db.withSchema(DEMO_SCHEMA).selectFrom('batch_partials').selectAll().execute()).length,
    0,
    'no partial results left behind',
  );
});

test('a batch outside its allowed hours waits for them', async () => {
  const job = 'rollup-hours';
  // Allowed from three seconds from now until an hour later (UTC).
  const opens = DateTime.utc().plus({ seconds: 3 }).startOf('second');
  const hours = { from: opens.toFormat('HH:mm:ss'), to: opens.plus({ hours: 1 }).toFormat('HH:mm:ss') };
  const catalog = defineCatalog([
    eventRollup({
      name: job,
      grid: 'day',
      start: '2026-06-10T00:00:00Z',
      chunkSize: 5_000,
      allowedHours: hours,
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  const key = `${job}/2026-06-10T00:00:00Z`;
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const handle = await stack.env.client.workflow.start('window', {
        taskQueue,
        workflowId: key,
        args: [
          {
            job,
            start: '2026-06-10T00:00:00Z',
            end: '2026-06-11T00:00:00Z',
            generation: 0,
            key,
            trigger: 'manual',
            policy: policy(undefined, { ...hours, timezone: 'UTC' }),
          },
        ],
      });
      assert.equal(((await handle.result()) as WindowRunResult).outcome, 'processed');
    },
  );
  const run = await stack.t.db
    .selectFrom('job_runs')
    .select('started_at')
    .where('job', '=', job)
    .where('kind', '=', 'window')
    .executeTakeFirstOrThrow();
  assert.ok(
    run.started_at.getTime() >= opens.toMillis(),
    `started ${run.started_at.toISOString()}, allowed from ${opens.toISO()}`,
  );
});
