// A worker in its own OS process, for tests that race several workers: the job comes from
// TEST_JOB (JSON: name, grid, start, holdMs), the rest from the usual environment.
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { NativeConnection } from '@temporalio/worker';
import { consoleLogger } from '../../activities/logger.js';
import { createDb } from '../../db/database.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import { defineCatalog } from '../../schedules/job.js';
import { createWorker } from '../../workers/create-worker.js';

const spec = JSON.parse(process.env.TEST_JOB ?? '{}') as { name: string; grid: string; start: string; holdMs: number; attemptTimeout?: string };
const db = createDb(process.env.DATABASE_URL!);
const catalog = defineCatalog([{
  name: spec.name, grid: spec.grid, start: spec.start, lateness: '0m', attemptTimeout: spec.attemptTimeout ?? '30s',
  retry: { maximumAttempts: 5, initialInterval: '100ms', maximumInterval: '1s' },
  // Holds the transaction open after the marker is claimed, so racing attempts meet there.
  handler: async (ctx) => {
    const counts = await summariseWindow(ctx);
    await sleep(spec.holdMs);
    return counts;
  },
}]);
const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
const worker = await createWorker({
  connection, namespace: 'default', taskQueue: process.env.TIDEMARK_TASK_QUEUE!,
  ...(process.env.WORKFLOW_BUNDLE ? { bundle: { code: await readFile(process.env.WORKFLOW_BUNDLE, 'utf8') } } : {}),
  deps: { db, catalog, logger: consoleLogger(`[${process.env.WORKER_NAME}] `), now: () => new Date() },
  shutdownGraceTime: '1s',
});
process.on('SIGTERM', () => worker.shutdown());
console.log('READY');
await worker.run();
await connection.close();
await db.destroy();
