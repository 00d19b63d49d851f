// A SIGKILL at each named crash point (activities/crash-points.ts): a worker process dies there,
// a second one takes over, and an independent checker (test/helpers/invariants.ts) finds no
// duplicate, no lost window or effect, and no effect in doubt left unalerted.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowNotFoundError } from '@temporalio/client';
import { CRASH_POINT, type CrashPoint } from '../../../activities/crash-points.js';
import type { BackfillResult } from '../../../contract/workflows.js';
import { checkInvariants, violations } from '../../helpers/invariants.js';
import { loopbackChannels } from '../../helpers/effects.js';
import { insertOrders, ordersBetween } from '../../helpers/jobs.js';
import { spawnWorker, type WorkerProcess, workerProcessEnv } from '../../helpers/processes.js';
import { eventually, realStack, uniqueQueue } from '../../helpers/temporal.js';

const stack = realStack();
const channels = loopbackChannels();

const HOUR = 3_600_000;
const WINDOWS = 2;

/**
 * Each case: the worker processes that die, in turn, each at the first time it reaches its
 * point, before one survives; each case has its own job, task queue and day of orders (the
 * summary reads every order in its window). An alert needs an incident: in the alert case the
 * first worker leaves an e-mail in doubt (begun, never sent), whose `unknown` alerts.
 */
const cases: {
  point: CrashPoint;
  day: string;
  crashes: { point: CrashPoint; nth: number }[];
  by?: 'backfill' | 'batch' | 'rerun';
}[] = [
  // A batched backfill (both windows in one batch activity): the worker dies after the batch
  // committed its first window; the batch, retried on the survivor, resumes with the second.
  {
    point: CRASH_POINT.inBatch,
    day: '2026-09-09',
    crashes: [{ point: CRASH_POINT.inBatch, nth: 1 }],
    by: 'batch',
  },
  // The second page is planned by the run the backfill continued as new into (a page a window).
  // It runs first: the planning activity lost with the dead worker is retried after its timeout.
  {
    point: CRASH_POINT.backfillPage,
    day: '2026-09-07',
    crashes: [{ point: CRASH_POINT.backfillPage, nth: 2 }],
    by: 'backfill',
  },
  // A rerun (generation 1) of a done window: its handler replaced generation 0's contribution.
  {
    point: CRASH_POINT.inGenerationSwap,
    day: '2026-09-08',
    crashes: [{ point: CRASH_POINT.inGenerationSwap, nth: 1 }],
    by: 'rerun',
  },
  {
    point: CRASH_POINT.beforeClaim,
    day: '2026-09-01',
    crashes: [{ point: CRASH_POINT.beforeClaim, nth: 1 }],
  },
  { point: CRASH_POINT.inHandler, day: '2026-09-02', crashes: [{ point: CRASH_POINT.inHandler, nth: 1 }] },
  {
    point: CRASH_POINT.afterCommit,
    day: '2026-09-03',
    crashes: [{ point: CRASH_POINT.afterCommit, nth: 1 }],
  },
  { point: CRASH_POINT.afterBegin, day: '2026-09-04', crashes: [{ point: CRASH_POINT.afterBegin, nth: 1 }] },
  {
    point: CRASH_POINT.afterProvider,
    day: '2026-09-05',
    crashes: [{ point: CRASH_POINT.afterProvider, nth: 1 }],
  },
  {
    point: CRASH_POINT.inAlertDelivery,
    day: '2026-09-06',
    crashes: [
      { point: CRASH_POINT.afterBegin, nth: 1 },
      { point: CRASH_POINT.inAlertDelivery, nth: 1 },
    ],
  },
];

/** The rerun's window run, started as the rerun workflow starts it once approved. */
const rerunPolicy = {
  retry: { maximumAttempts: 10, initialInterval: '100ms', maximumInterval: '500ms', backoffCoefficient: 2 },
  startToCloseTimeoutMs: 4_000,
  effectTimeoutMs: 3_000,
};

const iso = (d: Date) => d.toISOString().replace('.000Z', 'Z');

/** Waits until the window's run (started by a tick or a backfill) has ended, whether it succeeded or failed. */
async function windowRunEnded(key: string): Promise<void> {
  await eventually(
    async () => {
      try {
        await stack.env.client.workflow.getHandle(key).result();
        return true;
      } catch (err) {
        // Not started yet: the tick or backfill that starts it may itself be taking over from a dead worker.
        if (err instanceof WorkflowNotFoundError) return undefined;
        return true;
      }
    },
    120_000,
    `the run of window ${key} to end`,
  );
}

/** Spawns a worker that dies at `point`, and waits until it has died there. */
async function dieAt(name: string, env: Record<string, string>, point: CrashPoint): Promise<WorkerProcess> {
  const doomed = await spawnWorker(name, env);
  const died = new Promise<void>((r) => doomed.child.once('exit', () => r()));
  await eventually(
    async () => (doomed.child.exitCode !== null || doomed.child.signalCode !== null ? true : undefined),
    90_000,
    `worker ${name} to die at ${point}`,
  );
  await died;
  assert.equal(doomed.child.signalCode, 'SIGKILL', doomed.output());
  assert.match(doomed.output(), new RegExp(`CRASH point=${point} `), doomed.output());
  return doomed;
}

// The cases run side by side on the one stack: each waits on its own processes, never on the clock.
describe('crash points', { concurrency: 4 }, () => {
  for (const c of cases) {
    test(`SIGKILL at ${c.point}: a second worker takes over; no duplicate, no loss, no unalerted unknown`, async () => {
      const job = `crash-${c.point.replace(/[A-Z]/g, (l) => `-${l.toLowerCase()}`)}`;
      const taskQueue = uniqueQueue(job);
      const first = new Date(`${c.day}T00:00:00Z`);
      const windows = Array.from({ length: WINDOWS }, (_, i) => ({
        start: new Date(first.getTime() + i * HOUR),
        end: new Date(first.getTime() + (i + 1) * HOUR),
      }));
      const tickAt = iso(windows.at(-1)!.end);
      await insertOrders(stack.t.db, ordersBetween(job, iso(first), tickAt, 20 * WINDOWS, 10));
      const env = (crashAt?: { point: CrashPoint; nth: number }): Record<string, string> =>
        workerProcessEnv(stack, taskQueue, {
          name: job,
          grid: '1h',
          start: iso(first),
          holdMs: 0,
          smtpPort: channels.smtp.port,
          telegramUrl: channels.chat.telegramUrl,
          // Short, so that a dead attempt times out and its effect's lease passes quickly.
          attemptTimeout: '4s',
          effectTimeout: '3s',
          ...(crashAt ? { crashAt } : {}),
        });
      const workers: WorkerProcess[] = [];
      try {
        // The tick plans the closed windows from the watermark and starts their runs. It is not
        // waited for: a bookkeeping activity it lost with a dead worker retries only after its
        // timeout (a minute), which says nothing about the windows. The backfill case runs a page
        // a window, so that it continues as new between them.
        const tick = () =>
          stack.env.client.workflow.start('tick', {
            taskQueue,
            workflowId: `${job}/tick`,
            args: [{ job, now: tickAt }],
          });
        // The rerun case: generation 0 of every window first, on a worker that does not die; then
        // the rerun of the first window (generation 1) meets the crash.
        const rerunKey = `${job}/${iso(first)}#1`;
        if (c.by === 'rerun') {
          const steady = await spawnWorker(`${c.point}-steady`, env());
          workers.push(steady);
          await tick();
          for (const w of windows) await windowRunEnded(`${job}/${iso(w.start)}`);
          await steady.stop();
        }
        const runner =
          c.by === 'rerun'
            ? await stack.env.client.workflow.start('window', {
                taskQueue,
                workflowId: rerunKey,
                args: [
                  {
                    job,
                    start: iso(first),
                    end: iso(windows[0]!.end),
                    generation: 1,
                    key: rerunKey,
                    trigger: 'rerun',
                    policy: rerunPolicy,
                  },
                ],
              })
            : c.by === 'backfill' || c.by === 'batch'
              ? await stack.env.client.workflow.start('backfill', {
                  taskQueue,
                  workflowId: `${job}/backfill`,
                  args: [
                    c.by === 'batch'
                      ? { job, from: iso(first), to: tickAt, concurrency: 1, batch: WINDOWS }
                      : { job, from: iso(first), to: tickAt, concurrency: 1, pageSize: 1 },
                  ],
                })
              : await tick();
        for (const [i, crash] of c.crashes.entries())
          workers.push(await dieAt(`${c.point}-doomed-${i + 1}`, env(crash), crash.point));
        workers.push(await spawnWorker(`${c.point}-survivor`, env()));

        // The state asserted: every window run ended (done, or failed with its effects alerted)...
        for (const w of windows) await windowRunEnded(`${job}/${iso(w.start)}`);
        if (c.by === 'rerun') {
          await windowRunEnded(rerunKey);
          const swapped = await stack.t.db
            .selectFrom('job_windows')
            .select('status')
            .where('window_key', '=', rerunKey)
            .executeTakeFirst();
          assert.equal(swapped?.status, 'done', `${rerunKey} is done`);
        }
        if (c.by === 'backfill' || c.by === 'batch') {
          // Followed through its continue-as-new: the run that took over finished the range.
          const r = (await runner.result()) as BackfillResult;
          assert.equal(r.processed + r.alreadyDone, WINDOWS, JSON.stringify(r));
        }
        // ... and nothing is left in flight in the ledger.
        await eventually(
          async () => {
            const open = await stack.t.db
              .selectFrom('effects')
              .select('effect_key')
              .where('job', '=', job)
              .where('status', 'in', ['pending', 'begun'])
              .execute();
            return open.length === 0 ? true : undefined;
          },
          60_000,
          `the effects of ${job} to settle`,
        );
        const result = await checkInvariants(
          stack.t.db,
          job,
          windows,
          {
            emails: channels.smtp.messages,
            chat: channels.chat.messages,
          },
          { watermark: c.by !== 'backfill' },
        );
        const faults = workers.reduce((n, w) => n + (w.output().match(/^CRASH point=/gm) ?? []).length, 0);
        console.log(
          `crash point ${c.point}: faults injected ${faults}, duplicates ${result.duplicates.length}, lost ${result.lost.length}, unalerted unknowns ${result.unalertedUnknowns.length}`,
        );
        assert.equal(faults, c.crashes.length);
        assert.deepEqual(violations(result), [], workers.map((w) => w.output()).join('\n'));
        const done = await stack.t.db
          .selectFrom('job_windows')
          .select('window_key')
          .where('job', '=', job)
          .where('generation', '=', 0)
          .where('status', '=', 'done')
          .execute();
        assert.equal(done.length, WINDOWS);
      } finally {
        await Promise.all(workers.map((w) => w.stop()));
      }
    });
  }
});
