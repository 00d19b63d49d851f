// A host cut off while its window transaction holds the window's row (review of issue 9).
// Host A claims a window and then goes silent between statements (a partition: no FIN reaches
// PostgreSQL, whose TCP keepalive waits ~2 h by default, so its backend sits "idle in
// transaction" with the row lock). Host B retries the window after A's attempt timed out. B's
// retry must not wait on A's lock past its own attempt timeout (Temporal has given up on it by
// then, and it would hold one of B's pooled connections for as long as the lock is held: a few
// such retries exhaust B's pool), and the server must not keep A's transaction and its lock
// for much longer than an attempt. A is simulated by a handler held at a gate: from the server's
// side, a client that sends nothing more inside an open transaction is exactly a partition.
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { after, before, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { MockActivityEnvironment } from '@temporalio/testing';
import { windowActivities } from '../../../activities/window.js';
import { memoryLogger } from '../../../activities/logger.js';
import { createDb } from '../../../db/database.js';
import type { Database } from '../../../db/schema.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowResult } from '../../../contract/workflows.js';
import { createTestDb, tm, type TestDb } from '../../helpers/db.js';
import { gatedHandler, salesJob } from '../../helpers/jobs.js';
import { eventually, windowPolicy } from '../../helpers/temporal.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => {
  await t?.drop();
});

/** Each window attempt may take this long (its startToClose timeout). */
const ATTEMPT_MS = 2_000;
/** The server ends a window transaction idle for 2 attempts and this long (activities/window.ts). */
const IDLE_MARGIN_MS = 5_000;
/** What a busy machine may add to an attempt's own bound before the test calls it stuck. */
const SLACK_MS = 8_000;

const job = 'partitioned';
const start = '2026-05-05T10:00:00Z';
const input = {
  job,
  start,
  end: '2026-05-05T11:00:00Z',
  generation: 0,
  key: `${job}/${start}`,
  trigger: 'schedule' as const,
  policy: windowPolicy(3, ATTEMPT_MS),
};

const hostDeps = (db: Kysely<Database>, handler = salesJob(job).handler) => ({
  db,
  catalog: defineCatalog([salesJob(job, { handler })]),
  logger: memoryLogger(),
  now: () => new Date(),
});

/** What a promise ended with (a rejection is caught at once, never unhandled). */
const outcome = (p: Promise<unknown>): Promise<{ ok: boolean; value: unknown }> =>
  p.then(
    (value) => ({ ok: true, value }),
    (value: unknown) => ({ ok: false, value }),
  );

/** The promise's outcome, or 'still waiting' once `ms` have passed. */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'still waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still waiting'>((r) => (timer = setTimeout(() => r('still waiting'), ms)));
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

test("a retry behind a partitioned host's window transaction gives up within its attempt, and the server drops the silent transaction", async () => {
  const hostA = createDb(t.url, { max: 2 });
  const hostB = createDb(t.url, { max: 2 });
  const gate = gatedHandler();
  gate.hold(input.key);
  try {
    // Host A claims the window, then goes silent inside its transaction.
    const envA = new MockActivityEnvironment({ startToCloseTimeoutMs: ATTEMPT_MS, attempt: 1 });
    const a = outcome(envA.run(windowActivities(hostDeps(hostA, gate.handler)).processWindow, input));
    await eventually(
      async () => (gate.entered(input.key) ? true : undefined),
      30_000,
      'host A to hold the window',
    );

    // Host B retries once A's attempt has timed out.
    const envB = new MockActivityEnvironment({ startToCloseTimeoutMs: ATTEMPT_MS, attempt: 2 });
    const b = await within(
      outcome(envB.run(windowActivities(hostDeps(hostB)).processWindow, input)),
      ATTEMPT_MS + SLACK_MS,
    );
    const locks = await sql<{ state: string; waiting: boolean }>`
      select state, wait_event_type = 'Lock' as waiting from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid() and backend_type = 'client backend'`.execute(
      t.db,
    );
    assert.notEqual(
      b,
      'still waiting',
      `host B's retry still waits on host A's row lock ${(ATTEMPT_MS + SLACK_MS) / 1000} s into a ${ATTEMPT_MS / 1000} s attempt, holding one of its pooled connections: ${inspect(locks.rows)}`,
    );
    assert.equal((b as { ok: boolean }).ok, false, `B's attempt gives up, to be retried: ${inspect(b)}`);

    // The server ends A's silent transaction by itself: its lock goes.
    await eventually(
      async () => {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
           where datname = current_database() and state like 'idle in transaction%'`.execute(t.db);
        return rows[0]!.n === 0 ? true : undefined;
      },
      3 * ATTEMPT_MS + IDLE_MARGIN_MS + SLACK_MS,
      "the server to end host A's transaction",
    );
    gate.release(input.key);
    const endedA = await a;
    assert.equal(endedA.ok, false, `A's late work after the heal commits nothing: ${inspect(endedA)}`);

    // B's next retry processes the window, once.
    const envB2 = new MockActivityEnvironment({ startToCloseTimeoutMs: ATTEMPT_MS, attempt: 3 });
    const next = (await envB2.run(windowActivities(hostDeps(hostB)).processWindow, input)) as WindowResult;
    assert.equal(next.outcome, 'processed', inspect({ b, next }));
    const { rows } = await sql<{ status: string }>`
      select status from ${tm.job_windows} where job = ${job}`.execute(t.db);
    assert.deepEqual(rows, [{ status: 'done' }]);
  } finally {
    gate.release(input.key);
    await Promise.all([hostA.destroy(), hostB.destroy()]);
  }
});
