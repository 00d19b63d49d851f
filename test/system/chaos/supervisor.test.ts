// The fault suite's supervisor: a host's worker that dies is started again, and a clock change
// on a host whose worker has just died (a crash point a moment before) does not wait forever for
// an exit that already happened.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createHosts } from '../../../chaos/hosts.js';
import { HostWorkers } from '../../../chaos/supervisor.js';
import { eventually } from '../../helpers/temporal.js';

test('a clock change right after the worker died (killed by a signal) restarts it and returns', async () => {
  const hosts = await createHosts({ count: 1, mode: 'processes' });
  const workers = new HostWorkers({
    hosts,
    script: new URL('../../fixtures/idle-worker.ts', import.meta.url),
    config: {
      lanes: 1,
      liveStart: new Date().toISOString(),
      taskQueue: 'unused',
      smtp: { host: '127.0.0.1', port: 1 },
      telegramUrl: 'http://127.0.0.1:1',
      controlDir: '/nonexistent',
      bundlePath: '/nonexistent',
    },
    databaseUrl: () => 'postgres://unused',
    temporalAddress: '127.0.0.1:1',
    clock: (offsetMs) => ({ env: {}, nowOffsetMs: offsetMs }),
    log: () => undefined,
  });
  try {
    await workers.startAll();
    const first = workers.pidOf('h1')!;
    process.kill(first, 'SIGKILL');
    // Its exit is seen (the supervisor has not started the next one yet: it waits 300 ms).
    await eventually(async () => (workers.lives[0]!.endedAt ? true : undefined), 10_000, 'the exit');
    await Promise.race([
      workers.setClockOffset('h1', 3000),
      new Promise((_, reject) => setTimeout(() => reject(new Error('setClockOffset hung')), 30_000)),
    ]);
    const now = workers.pidOf('h1')!;
    assert.notEqual(now, first);
    assert.equal(workers.lives.at(-1)!.clockOffsetMs, 3000);
    assert.equal(workers.lives.at(-1)!.endedAt, undefined);
  } finally {
    await workers.stopAll();
  }
});
