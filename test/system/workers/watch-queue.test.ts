// The lag watch does not depend on the job workers: its schedule starts it on a task queue of its
// own, so a watch-only worker on another host still reports a job whose every worker is gone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig, pollQueues, watchQueueOf } from '../../../config/env.js';
import { openIncidents } from '../../../db/effects.js';
import { defineCatalog } from '../../../schedules/define.js';
import { syncSchedules } from '../../../workers/schedule-sync.js';
import { WATCH_SCHEDULE_ID, scheduleIdOf } from '../../../contract/schedule-ids.js';
import { createWorker } from '../../../workers/create-worker.js';
import { startChat } from '../../helpers/chat.js';
import { chatTexts, depsWithChannels } from '../../helpers/effects.js';
import { salesJob } from '../../helpers/jobs.js';
import { startSmtp } from '../../helpers/smtp.js';
import { eventually, realStack, sharedBundle, uniqueQueue } from '../../helpers/temporal.js';

const stack = realStack();

test('a worker polls the job queue and the watch queue; TIDEMARK_WORKER_ROLE picks one, and a bad value is named', () => {
  const config = loadConfig({ TIDEMARK_TASK_QUEUE: 'ops' });
  assert.equal(watchQueueOf(config), 'ops-watch');
  assert.deepEqual(pollQueues(config), ['ops', 'ops-watch']);
  assert.deepEqual(pollQueues(loadConfig({ TIDEMARK_TASK_QUEUE: 'ops', TIDEMARK_WORKER_ROLE: 'watch' })), [
    'ops-watch',
  ]);
  assert.deepEqual(pollQueues(loadConfig({ TIDEMARK_WORKER_ROLE: 'jobs' })), ['tidemark']);
  const own = loadConfig({ TIDEMARK_WATCH_TASK_QUEUE: 'lookout', TIDEMARK_WORKER_ROLE: 'watch' });
  assert.deepEqual(pollQueues(own), ['lookout']);
  assert.throws(
    () => loadConfig({ TIDEMARK_WORKER_ROLE: 'everything' }),
    (err: unknown) => err instanceof ConfigError && err.variable === 'TIDEMARK_WORKER_ROLE',
  );
  assert.throws(
    () => loadConfig({ TIDEMARK_TASK_QUEUE: 'same', TIDEMARK_WATCH_TASK_QUEUE: 'same' }),
    (err: unknown) =>
      err instanceof ConfigError &&
      err.variable === 'TIDEMARK_WATCH_TASK_QUEUE' &&
      /must differ from TIDEMARK_TASK_QUEUE/.test(err.message),
  );
});

test('with every job worker gone, a watch-only worker still runs the scheduled watch and alerts that no worker polls the job queue', async () => {
  const [smtp, chat] = await Promise.all([startSmtp({ requireAuth: true }), startChat()]);
  const job = 'orphaned';
  const config = loadConfig({ TIDEMARK_TASK_QUEUE: uniqueQueue('jobs'), TIDEMARK_WORKER_ROLE: 'watch' });
  // Started a day ago on an hourly grid and never run: far more than 3 windows behind.
  const start = new Date(Date.now() - 86_400_000);
  start.setUTCMinutes(0, 0, 0);
  const catalog = defineCatalog([
    salesJob(job, { start: start.toISOString(), lagThreshold: 3, alerts: { telegram: ['ops-chat'] } }),
  ]);
  const client = stack.env.client;
  const deps = {
    ...depsWithChannels(stack.t.db, catalog, smtp, chat),
    temporal: { client, taskQueue: config.TIDEMARK_TASK_QUEUE },
  };
  try {
    await syncSchedules(client, catalog, {
      taskQueue: config.TIDEMARK_TASK_QUEUE,
      watchTaskQueue: watchQueueOf(config),
      apply: true,
    });
    const watchAction = (await client.schedule.getHandle(WATCH_SCHEDULE_ID).describe()).action;
    const jobAction = (await client.schedule.getHandle(scheduleIdOf(job)).describe()).action;
    assert.equal(watchAction.type === 'startWorkflow' && watchAction.taskQueue, watchQueueOf(config));
    assert.equal(jobAction.type === 'startWorkflow' && jobAction.taskQueue, config.TIDEMARK_TASK_QUEUE);
    // A sync with the old default (the watch on the job queue) moves it.
    await syncSchedules(client, catalog, { taskQueue: config.TIDEMARK_TASK_QUEUE, apply: true });
    const moved = (await client.schedule.getHandle(WATCH_SCHEDULE_ID).describe()).action;
    assert.equal(moved.type === 'startWorkflow' && moved.taskQueue, `${config.TIDEMARK_TASK_QUEUE}-watch`);

    const [queue] = pollQueues(config);
    const worker = await createWorker({
      connection: stack.env.nativeConnection,
      namespace: stack.env.namespace ?? 'default',
      taskQueue: queue!,
      deps,
      bundle: await sharedBundle(),
      shutdownGraceTime: '1s',
    });
    await worker.runUntil(async () => {
      await client.schedule.getHandle(WATCH_SCHEDULE_ID).trigger();
      const [incident] = await eventually(
        async () => {
          const open = await openIncidents(stack.t.db, job);
          return open.length ? open : undefined;
        },
        60_000,
        'the lag incident',
      );
      assert.equal(incident!.kind, 'lag');
      assert.match(
        incident!.last_error ?? '',
        new RegExp(`no worker polls task queue "${config.TIDEMARK_TASK_QUEUE}"`),
      );
      await eventually(
        async () =>
          chatTexts(chat, 'telegram').some((t) => /orphaned: falling behind/.test(t)) ? true : undefined,
        30_000,
        'the lag alert in Telegram',
      );
    });
  } finally {
    await smtp.close();
    await chat.close();
  }
});
