// A worker in its own OS process, for tests that race several workers: the job comes from
// TEST_JOB (JSON: name, grid, start, holdMs), the rest from the usual environment.
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { NativeConnection } from '@temporalio/worker';
import type { CrashPoint } from '../../activities/crash-points.js';
import { consoleLogger } from '../../activities/logger.js';
import { createDb } from '../../db/database.js';
import { emailProvider } from '../../activities/notify/email.js';
import { telegramProvider } from '../../activities/notify/telegram.js';
import { eventRollup } from '../../jobs/event-rollup.js';
import { housekeeping } from '../../jobs/housekeeping/index.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import { defineCatalog } from '../../schedules/define.js';
import { createWorker } from '../../workers/create-worker.js';

const spec = JSON.parse(process.env.TEST_JOB ?? '{}') as {
  name: string;
  grid: string;
  start: string;
  holdMs: number;
  attemptTimeout?: string;
  /** Send a report e-mail per window through this SMTP port; alerts go to Telegram at this URL. */
  smtpPort?: number;
  telegramUrl?: string;
  effectTimeout?: string;
  /** Die (SIGKILL) right after the effect, before its done marker. */
  killAfterEffect?: boolean;
  /** Die (SIGKILL) the `nth` time (1 = the first) the named crash point is reached (for `key` only, if given). */
  crashAt?: { point: CrashPoint; nth: number; key?: string };
  /** A nightly rollup instead of the sales summary: chunk size, and the chunk after which to die. */
  rollup?: { chunkSize: number; killAfterChunk?: number; heartbeatTimeout: string };
  /** The built-in housekeeping job instead: dies (SIGKILL) after its `killAfterExport`-th quarantine export. */
  housekeeping?: { stateDir: string; batchSize: number; killAfterExport?: number };
};
const db = createDb(process.env.DATABASE_URL!);
const rollupJob =
  spec.rollup &&
  eventRollup({
    name: spec.name,
    grid: spec.grid,
    start: spec.start,
    chunkSize: spec.rollup.chunkSize,
    heartbeatTimeout: spec.rollup.heartbeatTimeout,
    retry: { maximumAttempts: 5, initialInterval: '100ms', maximumInterval: '1s' },
    afterChunk: (chunk) => {
      if (chunk === spec.rollup?.killAfterChunk) process.kill(process.pid, 'SIGKILL');
    },
  });
let exports = 0;
const housekeepingJob =
  spec.housekeeping &&
  housekeeping({
    stateDir: spec.housekeeping.stateDir,
    batchSize: spec.housekeeping.batchSize,
    afterExport: async (files) => {
      process.stdout.write(`EXPORTED ${files.join(',')}\n`);
      if (++exports === spec.housekeeping?.killAfterExport) process.kill(process.pid, 'SIGKILL');
      await sleep(0);
    },
  });
const catalog = defineCatalog(
  housekeepingJob
    ? [housekeepingJob]
    : rollupJob
      ? [rollupJob]
      : [
          {
            name: spec.name,
            grid: spec.grid,
            start: spec.start,
            lateness: '0m',
            attemptTimeout: spec.attemptTimeout ?? '30s',
            retry: { maximumAttempts: 5, initialInterval: '100ms', maximumInterval: '1s' },
            effectTimeout: spec.effectTimeout ?? '1m',
            alerts: spec.telegramUrl ? { telegram: ['ops-chat'] } : {},
            // Holds the transaction open after the marker is claimed, so racing attempts meet there.
            handler: async (ctx) => {
              const counts = await summariseWindow(ctx);
              await sleep(spec.holdMs);
              if (!spec.smtpPort) return counts;
              return {
                ...counts,
                effects: [
                  {
                    name: 'report',
                    channel: 'email' as const,
                    request: {
                      to: ['ops@example.test'],
                      subject: `report ${ctx.key}`,
                      text: `orders: ${counts.applied}`,
                    },
                  },
                ],
              };
            },
          },
        ],
);
const channels = {
  ...(spec.smtpPort
    ? {
        email: emailProvider({
          host: '127.0.0.1',
          port: spec.smtpPort,
          secure: false,
          rejectUnauthorized: false,
          from: 'tidemark@test',
          socketTimeoutMs: 5_000,
        }),
      }
    : {}),
  ...(spec.telegramUrl
    ? { telegram: telegramProvider({ token: 'test-token', apiUrl: spec.telegramUrl }) }
    : {}),
};
let crashPointHits = 0;
const hooks = {
  ...(spec.killAfterEffect
    ? {
        afterEffect: () => {
          process.kill(process.pid, 'SIGKILL');
        },
      }
    : {}),
  ...(spec.crashAt
    ? {
        crashPoint: (point: CrashPoint, key: string) => {
          if (point !== spec.crashAt?.point || (spec.crashAt.key !== undefined && key !== spec.crashAt.key))
            return;
          if (++crashPointHits !== spec.crashAt.nth) return;
          // Said on stdout first so the test can tell where the process died.
          process.stdout.write(`CRASH point=${point} key=${key}\n`, () =>
            process.kill(process.pid, 'SIGKILL'),
          );
          // Nothing after this point may run: wait for the signal.
          return new Promise<void>(() => undefined);
        },
      }
    : {}),
};
const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
const worker = await createWorker({
  connection,
  namespace: process.env.TEMPORAL_NAMESPACE || 'default',
  taskQueue: process.env.TIDEMARK_TASK_QUEUE!,
  ...(process.env.WORKFLOW_BUNDLE
    ? { bundle: { code: await readFile(process.env.WORKFLOW_BUNDLE, 'utf8') } }
    : {}),
  deps: {
    db,
    catalog,
    logger: consoleLogger(`[${process.env.WORKER_NAME}] `),
    now: () => new Date(),
    channels,
    hooks,
  },
  shutdownGraceTime: '1s',
});
process.on('SIGTERM', () => worker.shutdown());
console.log('READY');
await worker.run();
await connection.close();
await db.destroy();
