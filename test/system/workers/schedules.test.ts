// Schedule sync against the real server: create, change, pause kept, orphan deleted; and a
// schedule-fired tick that uses the schedule's nominal time.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadCatalog } from '../../../config/catalog-source.js';
import { loadConfig } from '../../../config/env.js';
import { memoryLogger } from '../../../activities/logger.js';
import { type JobSpec } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import { previewJob } from '../../../schedules/preview.js';
import { describePlan, syncSchedules } from '../../../workers/schedule-sync.js';
import { scheduleIdOf, WATCH_SCHEDULE_ID } from '../../../contract/schedule-ids.js';
import { windowAt } from '../../../schedules/windows.js';
import type { TickResult } from '../../../contract/workflows.js';
import { salesJob } from '../../helpers/jobs.js';
import { eventually, realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';

const stack = realStack();

async function listed(ids: string[]): Promise<true | undefined> {
  const seen = new Set<string>();
  for await (const s of stack.env.client.schedule.list()) seen.add(s.scheduleId);
  return ids.every((id) => seen.has(id)) ? true : undefined;
}

test('sync creates, updates, keeps a pause, and deletes orphans', async () => {
  const taskQueue = 'sync-q';
  const a: JobSpec = salesJob('sync-a', { grid: '1h', lateness: '5m' });
  const b: JobSpec = salesJob('sync-b', {
    grid: 'day',
    timezone: 'Europe/Berlin',
    tick: { cron: '15 0 * * *' },
  });
  const client = stack.env.client;

  const first = await syncSchedules(client, defineCatalog([a, b]), { taskQueue, apply: true });
  assert.deepEqual(
    [first.create.sort(), first.update, first.delete, first.failed],
    [[WATCH_SCHEDULE_ID, scheduleIdOf('sync-a'), scheduleIdOf('sync-b')], [], [], []],
  );
  const described = await client.schedule.getHandle(scheduleIdOf('sync-b')).describe();
  assert.equal(described.spec.timezone, 'Europe/Berlin');
  assert.equal(described.policies.overlap, 'SKIP');
  assert.equal(described.policies.catchupWindow, 86_400_000);
  assert.equal(described.action.type, 'startWorkflow');
  // The server's own next fire times agree with the offline preview.
  const preview = previewJob(defineCatalog([b]).get('sync-b'), new Date(), 3).tick.next;
  assert.deepEqual(
    described.info.nextActionTimes.slice(0, 3).map((d) => d.toISOString().replace('.000Z', 'Z')),
    preview,
  );

  const again = await syncSchedules(client, defineCatalog([a, b]), { taskQueue, apply: true });
  assert.deepEqual(again.unchanged.sort(), [
    WATCH_SCHEDULE_ID,
    scheduleIdOf('sync-a'),
    scheduleIdOf('sync-b'),
  ]);
  assert.deepEqual([again.create, again.update], [[], []]);

  // An operator pauses sync-a; the catalog changes its lateness; sync updates and keeps the pause.
  await client.schedule.getHandle(scheduleIdOf('sync-a')).pause('maintenance');
  const changed = { ...a, lateness: '20m' };
  const dry = await syncSchedules(client, defineCatalog([changed, b]), { taskQueue, apply: false });
  assert.deepEqual(dry.update, [scheduleIdOf('sync-a')]);
  assert.match(describePlan(dry), /~ update tidemark:sync-a \(stays paused\)/);
  const before = await client.schedule.getHandle(scheduleIdOf('sync-a')).describe();
  assert.deepEqual(before.spec.intervals, [{ every: 3_600_000, offset: 300_000 }], 'dry run changed nothing');
  await syncSchedules(client, defineCatalog([changed, b]), { taskQueue, apply: true });
  const after = await client.schedule.getHandle(scheduleIdOf('sync-a')).describe();
  assert.equal(after.state.paused, true);
  assert.equal(after.state.note, 'maintenance');
  assert.deepEqual(after.spec.intervals, [{ every: 3_600_000, offset: 1_200_000 }]);

  // sync-b leaves the catalog: its schedule is deleted; a schedule that is not ours stays.
  await client.schedule.create({
    scheduleId: 'someone-else',
    spec: { intervals: [{ every: '1h' }] },
    action: { type: 'startWorkflow', workflowType: 'x', taskQueue },
  });
  await eventually(
    () => listed([scheduleIdOf('sync-a'), scheduleIdOf('sync-b'), 'someone-else']),
    20_000,
    'schedules to be listed',
  );
  const removed = await syncSchedules(client, defineCatalog([changed]), { taskQueue, apply: true });
  assert.deepEqual(removed.delete, [scheduleIdOf('sync-b')]);
  await assert.rejects(client.schedule.getHandle(scheduleIdOf('sync-b')).describe());
  await client.schedule.getHandle('someone-else').describe();
});

test('a schedule-fired tick uses the nominal time and processes the closed windows', async () => {
  const job = 'fired';
  const taskQueue = uniqueQueue(job);
  const start = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000 - 3 * 3_600_000);
  const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: start.toISOString() })]);
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      await syncSchedules(stack.env.client, catalog, { taskQueue, apply: true });
      const handle = stack.env.client.schedule.getHandle(scheduleIdOf(job));
      // Its own fire (each hour, lateness 0m) would add a tick and maybe a window to the runs listed
      // below when the test spans the hour: paused, only the trigger fires it.
      await handle.pause('only the test fires it');
      await handle.trigger();
      const described = await eventually(
        async () => {
          const d = await handle.describe();
          return d.info.recentActions.length > 0 ? d : undefined;
        },
        20_000,
        'the schedule to fire',
      );
      const action = described.info.recentActions[0]!.action;
      assert.match(action.workflow.workflowId, /^fired\/tick-\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      const result = (await stack.env.client.workflow
        .getHandle(action.workflow.workflowId, action.workflow.firstExecutionRunId)
        .result()) as TickResult;
      assert.ok(
        [3, 4].includes(result.started.length),
        `${result.started.length} windows (4 only if an hour turned during the test)`,
      );
      assert.equal(result.watermark, start.toISOString().replace('.000Z', 'Z'));
      for (const key of result.started) await stack.env.client.workflow.getHandle(key).result();
      // The Web UI can find this job's runs by its search attributes.
      const runs = await eventually(
        async () => {
          const found: string[] = [];
          for await (const wf of stack.env.client.workflow.list({ query: `TidemarkJob = "${job}"` }))
            found.push(`${wf.searchAttributes.TidemarkKind?.[0]} ${wf.workflowId}`);
          return found.length >= result.started.length + 1 ? found.sort() : undefined;
        },
        20_000,
        'the runs to be searchable',
      );
      assert.deepEqual(
        runs,
        [...result.started.map((k) => `window ${k}`), `tick ${action.workflow.workflowId}`].sort(),
      );
      const windows: string[] = [];
      for await (const wf of stack.env.client.workflow.list({
        query: `TidemarkJob = "${job}" AND TidemarkKind = "window" AND TidemarkWindowStart >= "${start.toISOString()}"`,
      }))
        windows.push(wf.workflowId);
      assert.equal(windows.length, result.started.length);
    },
  );
});

test('a 1-minute grid with 10 s lateness ticks at each window end + 10 s, to the second', async () => {
  const client = stack.env.client;
  const catalog = defineCatalog([salesJob('sync-seconds', { grid: '1m', lateness: '10s' })]);
  const job = catalog.get('sync-seconds');
  await syncSchedules(client, catalog, { taskQueue: uniqueQueue('sync-seconds'), apply: true });
  const handle = client.schedule.getHandle(scheduleIdOf(job.name));
  try {
    const described = await handle.describe();
    const next = described.info.nextActionTimes.slice(0, 3).map((d) => d.getTime());
    assert.equal(next.length, 3);
    for (const t of next) {
      // The server's fire time is the end of a window plus the lateness, exactly.
      const w = windowAt(job.grid, job.timezone, new Date(t - job.latenessMs - 1));
      assert.equal(new Date(t).toISOString(), new Date(w.end.getTime() + job.latenessMs).toISOString());
    }
    // The offline preview agrees with the server, and each fire is a window's first processable instant.
    const preview = previewJob(job, new Date(next[0]! - 1), 3);
    assert.deepEqual(
      preview.tick.next,
      next.map((t) => new Date(t).toISOString().replace('.000Z', 'Z')),
    );
    const processable = previewJob(job, new Date(next[0]! - job.latenessMs - 60_000), 3).windows.map(
      (w) => w.processableFrom,
    );
    assert.deepEqual(processable, preview.tick.next);
  } finally {
    await handle.delete();
  }
});

test("sync of the demo catalog that tidemark fell back to (no catalog module here) refuses to delete your jobs' schedules", async () => {
  const client = stack.env.client;
  const taskQueue = uniqueQueue('fallback');
  await syncSchedules(client, defineCatalog([salesJob('yours-a'), salesJob('yours-b')]), {
    taskQueue,
    apply: true,
  });
  const empty = await mkdtemp(join(tmpdir(), 'tidemark-nocatalog-'));
  try {
    const warned: string[] = [];
    const fallback = await loadCatalog(loadConfig({}), {
      cwd: empty,
      env: undefined,
      flag: undefined,
      warn: (l) => warned.push(l),
    });
    assert.equal(warned.length, 1);
    await assert.rejects(
      syncSchedules(client, fallback, { taskQueue, apply: true }),
      /the demo catalog, and syncing it would delete \d+ schedule\(s\) .*tidemark:yours-a.*TIDEMARK_CATALOG=demo/s,
    );
    for (const id of [scheduleIdOf('yours-a'), scheduleIdOf('yours-b')])
      await client.schedule.getHandle(id).describe(); // still there
    const demo = await loadCatalog(loadConfig({}), {
      cwd: empty,
      env: 'demo',
      flag: undefined,
      warn: (l) => warned.push(l),
    });
    assert.equal(warned.length, 1, 'the demo named on purpose is not a fallback');
    const dry = await syncSchedules(client, demo, { taskQueue, apply: false });
    assert.ok(dry.delete.includes(scheduleIdOf('yours-a')), 'asked for on purpose, it would sync as told');
  } finally {
    await rm(empty, { recursive: true, force: true });
  }
});
