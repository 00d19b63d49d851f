// The watch workflow on the time-skipping server with stand-in activities: it delivers what the
// lag check raised, drives again the alerts that were not delivered, and reports what stays so.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { timeSkipping, withStandIns } from '../helpers/time-skipping.js';

const stack = timeSkipping();

test('a watch delivers the lag alerts, redrives the undelivered ones, then reports those still down', async () => {
  const performed: string[] = [];
  const result = await withStandIns(
    stack.env,
    {
      checkLag: async () => ({ reports: [], deliveries: ['alert:1:opened:email:ops'] }),
      alertsDue: async () => ['alert:2:opened:slack:ops', 'alert:3:opened:telegram:ops'],
      reportUndeliveredAlerts: async () => ['alert:4:opened:email:ops'],
      performEffect: async ({ key }: { key: string }) => {
        performed.push(key);
        if (key === 'alert:3:opened:telegram:ops') throw new Error('telegram is down');
        return { key, outcome: 'done', providerId: 'p', error: null };
      },
    },
    (taskQueue) =>
      stack.env.client.workflow.execute('watch', { taskQueue, workflowId: 'watch-1', args: [{}] }),
  );
  assert.deepEqual(result, { reports: [], deliveries: ['alert:1:opened:email:ops'] });
  // The lag alert first; a redelivery that fails does not stop the other one, nor the report.
  assert.equal(performed[0], 'alert:1:opened:email:ops');
  assert.deepEqual(performed.slice(1, 3).sort(), ['alert:2:opened:slack:ops', 'alert:3:opened:telegram:ops']);
  assert.equal(
    performed.filter((k) => k === 'alert:3:opened:telegram:ops').length,
    1,
    'one attempt per watch',
  );
  assert.equal(performed.at(-1), 'alert:4:opened:email:ops');
});
