// A batch's windows committed in groups: the claims of a group in one statement, each window's
// handler, then the finishes of the group in one statement carrying the COMMIT. What each window
// gets is what its own transaction would give it (a done marker, a run record, counts, effects,
// alerts, the watermark over it); a handler failure rolls the whole group back and its windows run
// one transaction each, so the failure is the failing window's alone.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { MockActivityEnvironment } from '@temporalio/testing';
import { CRASH_POINT } from '../../../activities/crash-points.js';
import { memoryLogger } from '../../../activities/logger.js';
import { readWatermark, watermarkOf } from '../../../db/ledger.js';
import { isoUtc } from '../../../contract/window-key.js';
import type { BatchInput, BatchResult, WindowSpec } from '../../../contract/workflows.js';
import type { JobSpec } from '../../../schedules/job.js';
import { createTestDb, statementsSent, type TestDb } from '../../helpers/db.js';
import { eventually } from '../../helpers/temporal.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../../helpers/windows.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-04-01T00:00:00Z');
let t: TestDb;

before(async () => {
  t = await createTestDb();
  await sql`create table public.group_sums (job text, window_start timestamptz, n integer,
            primary key (job, window_start))`.execute(t.db);
});
after(async () => t?.drop());

const policy = windowPolicy(3, 30_000);

/** A batch of `n` hourly windows of `job` from window `from`. */
function batchOf(job: string, n: number, from = 0): BatchInput {
  const windows: WindowSpec[] = Array.from({ length: n }, (_, i) => {
    const w = hourlyWindow(job, T0, from + i, policy, 'backfill');
    return { job, start: w.start, end: w.end, generation: w.generation, key: w.key };
  });
  return { job, windows, policy, trigger: 'backfill' };
}

/** A handler writing one row per window (a duplicate would fail on the key). */
const summing =
  (fail?: (key: string) => boolean): JobSpec['handler'] =>
  async (ctx) => {
    if (fail?.(ctx.key)) throw new Error(`the source is down for ${ctx.key}`);
    await sql`insert into public.group_sums values (${ctx.job.name}, ${ctx.window.start}, 1)`.execute(
      ctx.trx,
    );
    return { input: 1, applied: 1, quarantined: 0 };
  };

async function runsOf(job: string) {
  return await t.db
    .selectFrom('job_runs')
    .select(['window_start', 'outcome', 'attempt'])
    .where('job', '=', job)
    .where('kind', '=', 'window')
    .orderBy('id')
    .execute();
}

async function sumsOf(job: string): Promise<number> {
  const r = await sql<{
    n: number;
  }>`select count(*)::int as n from public.group_sums where job = ${job}`.execute(t.db);
  return r.rows[0]!.n;
}

test("a batch's windows commit in groups: about one round trip a window besides the handler's", async () => {
  const job = 'grp-trips';
  const n = 40;
  const acts = directActivities(t.db, [hourlyJob(job, T0, summing())]);
  await watermarkOf(t.db, job, new Date(T0));
  const { result, sent } = await statementsSent(t.db, () => acts.processWindowBatch(batchOf(job, n)));
  assert.deepEqual(
    result.outcomes.map((o) => o.outcome),
    Array.from({ length: n }, () => 'processed'),
  );
  const handlers = sent.filter((s) => s.startsWith('insert into public.group_sums')).length;
  assert.equal(handlers, n);
  // One window a transaction costs a claim and a finish each (2n besides the handlers'); grouped,
  // a claim and a finish per group.
  assert.ok(sent.length - handlers <= n / 2, `${sent.length - handlers} statements besides the handlers'`);
  const runs = await runsOf(job);
  assert.equal(runs.length, n);
  assert.ok(runs.every((r) => r.outcome === 'processed' && r.attempt === 1));
  assert.equal(await sumsOf(job), n);
  const rows = await t.db
    .selectFrom('job_windows')
    .select(['status', 'attempts', 'records_in', 'records_applied', 'duration_ms', 'finished_at'])
    .where('job', '=', job)
    .execute();
  assert.equal(rows.length, n);
  for (const r of rows) {
    assert.deepEqual([r.status, r.attempts, r.records_in, r.records_applied], ['done', 1, 1, 1]);
    assert.ok(r.finished_at instanceof Date && r.duration_ms !== null && r.duration_ms >= 0);
  }
  assert.equal(isoUtc((await readWatermark(t.db, job))!), isoUtc(new Date(T0 + n * HOUR)));
});

test('a handler failing in a group: the group rolls back, its windows run one by one, the failure is its own', async () => {
  const job = 'grp-fail';
  const n = 12;
  const bad = `${job}/${isoUtc(new Date(T0 + 5 * HOUR))}`;
  const acts = directActivities(t.db, [
    hourlyJob(
      job,
      T0,
      summing((key) => key === bad),
    ),
  ]);
  await watermarkOf(t.db, job, new Date(T0));
  const result = await acts.processWindowBatch(batchOf(job, n));
  assert.deepEqual(
    result.outcomes.map((o) => [o.key.slice(job.length + 1), o.outcome]),
    batchOf(job, n).windows.map((w) => [w.start, w.key === bad ? 'failed' : 'processed']),
  );
  assert.match(result.outcomes[5]!.error!, /the source is down/);
  const runs = await runsOf(job);
  // One run record per window: the rolled-back group left none.
  assert.deepEqual(
    runs.map((r) => `${isoUtc(r.window_start!)}:${r.outcome}`),
    batchOf(job, n).windows.map((w) => `${w.start}:${w.key === bad ? 'failed' : 'processed'}`),
  );
  assert.equal(await sumsOf(job), n - 1);
  const failed = await t.db
    .selectFrom('job_windows')
    .select(['status', 'attempts'])
    .where('job', '=', job)
    .where('status', '=', 'failed')
    .execute();
  assert.deepEqual(
    failed.map((f) => ({ ...f })),
    [{ status: 'failed', attempts: 1 }],
  );
  assert.equal(isoUtc((await readWatermark(t.db, job))!), isoUtc(new Date(T0 + 5 * HOUR)));
});

test('windows already done in a group answer already-done; the rest of the group is processed', async () => {
  const job = 'grp-done';
  const n = 10;
  const acts = directActivities(t.db, [hourlyJob(job, T0, summing())]);
  await watermarkOf(t.db, job, new Date(T0));
  for (const i of [0, 3, 4, 9]) await acts.processWindow(hourlyWindow(job, T0, i, policy));
  const result = await acts.processWindowBatch(batchOf(job, n));
  assert.deepEqual(
    result.outcomes.map((o) => o.outcome),
    Array.from({ length: n }, (_, i) => ([0, 3, 4, 9].includes(i) ? 'already-done' : 'processed')),
  );
  assert.equal(await sumsOf(job), n);
  const runs = await runsOf(job);
  assert.equal(runs.filter((r) => r.outcome === 'processed').length, n);
  assert.equal(runs.filter((r) => r.outcome === 'skipped').length, 4);
  assert.equal(isoUtc((await readWatermark(t.db, job))!), isoUtc(new Date(T0 + n * HOUR)));
});

test('effects and findings of windows in a group are recorded with their commit; windows with effects are followed up', async () => {
  const job = 'grp-effects';
  const n = 6;
  const acts = directActivities(t.db, [
    hourlyJob(job, T0, async (ctx) => {
      await summing()(ctx);
      const i = (Date.parse(ctx.window.start.toISOString()) - T0) / HOUR;
      return {
        input: 1,
        applied: 1,
        quarantined: 0,
        ...(i % 2 === 0
          ? {
              effects: [
                {
                  name: 'report',
                  channel: 'email' as const,
                  request: { to: ['ops@example.test'], subject: `report ${ctx.key}`, text: 'x' },
                },
              ],
            }
          : {}),
        ...(i === 3 ? { findings: [{ subject: 'stock', message: 'stock below zero' }] } : {}),
      };
    }),
  ]);
  await watermarkOf(t.db, job, new Date(T0));
  const result = await acts.processWindowBatch(batchOf(job, n));
  assert.deepEqual(
    result.outcomes.map((o) => [o.outcome, o.followUp ?? false]),
    // No alert channel here: the finding opens its incident with nothing to deliver.
    Array.from({ length: n }, (_, i) => ['processed', i % 2 === 0]),
  );
  const effects = await t.db
    .selectFrom('effects')
    .select(['effect_key', 'status'])
    .where('job', '=', job)
    .orderBy('effect_key')
    .execute();
  assert.deepEqual(
    effects.map((e) => ({ ...e })),
    [0, 2, 4].map((i) => ({
      effect_key: `${job}/${isoUtc(new Date(T0 + i * HOUR))}:report`,
      status: 'pending',
    })),
  );
  const incidents = await t.db
    .selectFrom('incidents')
    .select(['subject', 'kind'])
    .where('job', '=', job)
    .execute();
  assert.deepEqual(
    incidents.map((i) => ({ ...i })),
    [{ subject: `${job}/${isoUtc(new Date(T0 + 3 * HOUR))}:stock`, kind: 'finding' }],
  );
});

test('a window that failed before recovers in a group: its incident closes with the commit', async () => {
  const job = 'grp-recover';
  let down = true;
  const flaky = `${job}/${isoUtc(new Date(T0 + 2 * HOUR))}`;
  const acts = directActivities(t.db, [
    hourlyJob(
      job,
      T0,
      summing((key) => down && key === flaky),
    ),
  ]);
  await watermarkOf(t.db, job, new Date(T0));
  await assert.rejects(acts.processWindow(hourlyWindow(job, T0, 2, policy)));
  await acts.raiseIncident({ job, subject: flaky, kind: 'window-failed', error: 'down', attempts: 1 });
  down = false;
  const result = await acts.processWindowBatch(batchOf(job, 5));
  assert.deepEqual(
    result.outcomes.map((o) => [o.outcome, o.followUp ?? false]),
    [0, 1, 2, 3, 4].map(() => ['processed', false]),
  );
  const open = await t.db
    .selectFrom('incidents')
    .select(['subject', 'closed_at'])
    .where('job', '=', job)
    .execute();
  assert.equal(open.length, 1);
  assert.ok(open[0]!.closed_at instanceof Date, 'the incident closed');
  const row = await t.db
    .selectFrom('job_windows')
    .select(['status', 'attempts'])
    .where('window_key', '=', flaky)
    .executeTakeFirstOrThrow();
  assert.deepEqual({ ...row }, { status: 'done', attempts: 2 });
});

test('a window crossing a done span in a group fails alone; the others are processed', async () => {
  const job = 'grp-span';
  const acts = directActivities(t.db, [hourlyJob(job, T0, summing())]);
  await watermarkOf(t.db, job, new Date(T0));
  // A span ending in the middle of window 3 (a grid changed under it).
  await t.db
    .insertInto('job_done_spans')
    .values({ job, span_start: new Date(T0 + 3 * HOUR), span_end: new Date(T0 + 3 * HOUR + 1_800_000) })
    .execute();
  const result = await acts.processWindowBatch(batchOf(job, 6));
  assert.deepEqual(
    result.outcomes.map((o) => o.outcome),
    ['processed', 'processed', 'processed', 'failed', 'processed', 'processed'],
  );
  assert.match(result.outcomes[3]!.error!, /done span/);
  assert.equal(await sumsOf(job), 5);
});

test('a window inside a done span in a group answers already-done and runs no handler', async () => {
  const job = 'grp-inspan';
  const acts = directActivities(t.db, [hourlyJob(job, T0, summing())]);
  await watermarkOf(t.db, job, new Date(T0));
  await t.db
    .insertInto('job_done_spans')
    .values({ job, span_start: new Date(T0 + 2 * HOUR), span_end: new Date(T0 + 4 * HOUR) })
    .execute();
  const result = await acts.processWindowBatch(batchOf(job, 6));
  assert.deepEqual(
    result.outcomes.map((o) => o.outcome),
    ['processed', 'processed', 'already-done', 'already-done', 'processed', 'processed'],
  );
  assert.equal(await sumsOf(job), 4);
});

test('groups of slow windows are bounded by their windows’ attempts, not one: every window is processed', async () => {
  const job = 'grp-slow';
  const slow = windowPolicy(3, 1_000);
  const acts = directActivities(t.db, [
    hourlyJob(job, T0, async (ctx) => {
      await new Promise((r) => setTimeout(r, 400));
      return await summing()(ctx);
    }),
  ]);
  await watermarkOf(t.db, job, new Date(T0));
  const input = { ...batchOf(job, 8), policy: slow };
  const result = await acts.processWindowBatch(input);
  assert.deepEqual(
    result.outcomes.map((o) => o.outcome),
    Array.from({ length: 8 }, () => 'processed'),
  );
  assert.equal(isoUtc((await readWatermark(t.db, job))!), isoUtc(new Date(T0 + 8 * HOUR)));
});

test('a group that rolls back says why once; its windows then run one by one', async () => {
  const job = 'grp-why';
  let failures = 0;
  const flaky = `${job}/${isoUtc(new Date(T0 + 2 * HOUR))}`;
  const logger = memoryLogger();
  const acts = directActivities(
    t.db,
    [
      hourlyJob(
        job,
        T0,
        summing((key) => key === flaky && failures++ === 0),
      ),
    ],
    { logger },
  );
  await watermarkOf(t.db, job, new Date(T0));
  const result = await acts.processWindowBatch(batchOf(job, 4));
  assert.deepEqual(
    result.outcomes.map((o) => o.outcome),
    ['processed', 'processed', 'processed', 'processed'],
  );
  const said = logger.lines.filter((l) => l.includes('rolled back'));
  assert.equal(said.length, 1, logger.lines.join('\n'));
  assert.match(
    said[0]!,
    new RegExp(`group of 4 windows from ${job}/\\S+ rolled back \\(the source is down for ${flaky}\\)`),
  );
});

test('a batch whose workers die in groups twice: the third attempt runs no window the lost groups held', async () => {
  const job = 'grp-lost';
  const n = 100;
  const input = batchOf(job, n);
  const since = Date.now() - 60_000;
  await watermarkOf(t.db, job, new Date(T0));
  const indexOf = (key: string) => (Date.parse(key.slice(job.length + 1)) - T0) / HOUR;
  const lost: (() => void)[] = [];
  const ended: Promise<unknown>[] = [];

  /** Attempt `n` of the batch; it hangs in the handler of window `dieIn`, its connection then cut. */
  async function attempt(n: number, dieIn: number | null) {
    let dead = false;
    // Hangs as a dead worker would; released (failing) once the test is done, the attempt cancelled.
    const hung = new Promise<void>((_, reject) =>
      lost.push(() => {
        env.cancel();
        reject(new Error('the worker is gone'));
      }),
    );
    hung.catch(() => undefined);
    const ran: number[] = [];
    const acts = directActivities(t.db, [hourlyJob(job, T0, summing())], {
      hooks: {
        crashPoint: async (point: string, key: string) => {
          if (dead) return await hung;
          if (point !== CRASH_POINT.inHandler) return;
          ran.push(indexOf(key));
          if (indexOf(key) === dieIn) {
            dead = true;
            return await hung;
          }
        },
      },
    });
    const env: MockActivityEnvironment = new MockActivityEnvironment({
      attempt: n,
      heartbeatDetails: { outcomes: [] },
      workflowExecution: { workflowId: `${job}/backfill`, runId: 'run-1' },
      scheduledTimestampMs: since,
    });
    const run = env.run(acts.processWindowBatch, input);
    if (dieIn === null) return { ran, result: await run };
    ended.push(run.catch(() => undefined));
    await eventually(async () => (dead ? true : undefined), 30_000, `attempt ${n} to reach window ${dieIn}`);
    // The worker is gone: its transaction's connection with it.
    await eventually(
      async () => {
        const cut = await sql<{ pid: number }>`
          select pg_terminate_backend(pid) as pid from pg_stat_activity
           where datname = current_database() and state like 'idle in transaction%'
             and pid <> pg_backend_pid()`.execute(t.db);
        return cut.rows.length > 0 ? true : undefined;
      },
      10_000,
      'the lost attempt’s transaction',
    );
    return { ran, result: null };
  }

  try {
    await attempt(1, 10);
    const second = await attempt(2, 70);
    assert.ok(!second.ran.includes(10), 'the second attempt ran no window of the first lost group');
    const third = await attempt(3, null);
    assert.ok(!third.ran.includes(10) && !third.ran.includes(70), JSON.stringify(third.ran));
    const outcomes = (third.result as BatchResult).outcomes;
    assert.equal(outcomes.length, n);
    for (const i of [10, 70]) assert.equal(outcomes[i]!.outcome, 'failed', `window ${i}`);
    // Every window is processed once by the batch, or handed to its own run (none of them both).
    const runs = await runsOf(job);
    const processed = runs.filter((r) => r.outcome === 'processed').map((r) => isoUtc(r.window_start!));
    assert.equal(new Set(processed).size, processed.length, 'none processed twice');
    for (const [i, o] of outcomes.entries())
      assert.equal(
        processed.includes(input.windows[i]!.start),
        o.outcome === 'processed',
        `window ${i}: ${o.outcome}`,
      );
    assert.equal(await sumsOf(job), processed.length);
  } finally {
    for (const release of lost) release();
    await Promise.all(ended);
  }
});
