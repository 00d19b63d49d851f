// The rerun preview's activity on a real PostgreSQL: the handler runs in the window's own
// transaction, which always rolls back (after a handler error too); the guards of the real path
// hold; nothing is recorded (no marker, no effect, no watermark move); a job that acts outside
// its transaction is not run at all; effects are listed against the generation they replace. And
// what a handler can make outlast the rolled-back transaction (a COMMIT, a session lock, a held row)
// or carry out of it in the preview's rows (a secret, huge values, a wide table).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql, type RawBuilder } from 'kysely';
import pg from 'pg';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import type { JobSpec } from '../../../schedules/job.js';
import { previewLines, slackPreview } from '../../../contract/preview-text.js';
import { createTestDb, tm, type TestDb } from '../../helpers/db.js';
import { insertOrders, ordersBetween, salesJob } from '../../helpers/jobs.js';
import { directActivities } from '../../helpers/windows.js';
import { holding, policy } from '../../helpers/reruns.js';
import { eventually } from '../../helpers/temporal.js';
import { demo, DEMO_SCHEMA, demoTable } from '../../../jobs/demo-schema.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => {
  await t?.drop();
});

const writes = [{ table: demoTable('daily_sales'), key: ['job', 'day'] }];

const activitiesFor = (jobs: JobSpec[]) => directActivities(t.db, jobs);

/** Everything a run would leave behind for `job`: markers, runs, effects, watermark, summary. */
async function ledgerOf(job: string) {
  const rows = async (table: RawBuilder<unknown>, where = sql`job = ${job}`) =>
    (
      await sql<{
        r: unknown;
      }>`select to_jsonb(x) as r from ${table} x where ${where} order by 1::text`.execute(t.db)
    ).rows
      .map((r) => JSON.stringify(r.r))
      .sort();
  return {
    windows: await rows(tm.job_windows),
    runs: await rows(tm.job_runs),
    effects: await rows(tm.effects),
    watermark: await rows(tm.job_watermarks),
    sales: await rows(demo.daily_sales),
    totals: await rows(demo.sales_window_totals),
    quarantine: await rows(tm.quarantine),
  };
}

async function processed(
  acts: ReturnType<typeof activitiesFor>,
  job: string,
  W: { start: string; end: string },
) {
  const r = await acts.processWindow({
    job,
    ...W,
    generation: 0,
    key: `${job}/${W.start}`,
    trigger: 'manual',
    policy,
  });
  assert.equal(r.outcome, 'processed');
}

test('the preview runs the handler in a transaction that rolls back: the late order shows, nothing stays', async () => {
  const job = 'pv-late';
  const W = { start: '2026-05-01T10:00:00Z', end: '2026-05-01T11:00:00Z' };
  const acts = activitiesFor([salesJob(job, { start: W.start, lateness: '0m', writes })]);
  await insertOrders(t.db, ordersBetween(job, W.start, W.end, 10));
  await processed(acts, job, W);
  const [day] = await t.db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('daily_sales')
    .selectAll()
    .where('job', '=', job)
    .execute();
  await insertOrders(t.db, [{ key: `${job}-late`, at: '2026-05-01T10:59:00Z', amount: 250.5 }]);
  const ledger = await ledgerOf(job);

  const p = await acts.previewWindow({ job, windowStart: W.start });
  assert.equal(p.outcome, 'ok', p.note);
  assert.deepEqual([p.generation, p.previous], [1, 0]);
  assert.deepEqual(
    p.tables!.map((x) => [x.table, x.added, x.removed, x.changed]),
    [[demoTable('daily_sales'), 0, 0, 1]],
  );
  const row = p.tables![0]!.rows[0]!;
  assert.deepEqual(row.key, { job, day: '2026-05-01' });
  assert.deepEqual(
    [row.before!.order_count, row.before!.total, row.after!.order_count, row.after!.total],
    ['10', day!.total, '11', (Number(day!.total) + 250.5).toFixed(2)],
  );
  assert.match(
    previewLines(p).join('\n'),
    /~ job=pv-late day=2026-05-01: order_count 10 -> 11, total \S+ -> \S+/,
  );
  assert.deepEqual(await ledgerOf(job), ledger, 'nothing the preview did stayed');

  // Computed again over the same data: the same change, the same digest.
  assert.equal((await acts.previewWindow({ job, windowStart: W.start })).digest, p.digest);
});

test('a window with no change previews "no change"', async () => {
  const job = 'pv-same';
  const W = { start: '2026-05-02T10:00:00Z', end: '2026-05-02T11:00:00Z' };
  const acts = activitiesFor([salesJob(job, { start: W.start, lateness: '0m', writes })]);
  await insertOrders(t.db, ordersBetween(job, W.start, W.end, 6));
  await processed(acts, job, W);
  const p = await acts.previewWindow({ job, windowStart: W.start });
  assert.deepEqual(previewLines(p), [
    `preview of generation 1 (replaces generation 0), computed ${p.computedAt}: no change`,
  ]);
});

test('a failing handler, a session SET and a job acting outside its transaction: said, and nothing stays', async () => {
  const W = { start: '2026-05-03T10:00:00Z', end: '2026-05-03T11:00:00Z' };
  let outsideRuns = 0;
  const failing = salesJob('pv-fail', {
    start: W.start,
    lateness: '0m',
    writes,
    handler: async (ctx) => {
      const counts = await summariseWindow(ctx);
      // After generation 0: write, then fail (the rollback must take the write back).
      if (ctx.generation > 0) throw new Error('the source said no');
      return counts;
    },
  });
  const setter = salesJob('pv-set', {
    start: W.start,
    lateness: '0m',
    handler: async (ctx) => {
      if (ctx.generation > 0) await sql`set statement_timeout = 0`.execute(ctx.trx);
      return await summariseWindow(ctx);
    },
  });
  const outside = salesJob('pv-outside', {
    start: W.start,
    lateness: '0m',
    noPreview: 'it deletes files',
    handler: async (ctx) => {
      outsideRuns++;
      return await summariseWindow(ctx);
    },
  });
  const acts = activitiesFor([failing, setter, outside]);
  for (const job of ['pv-fail', 'pv-set', 'pv-outside']) {
    await insertOrders(t.db, ordersBetween(job, W.start, W.end, 3));
    await processed(acts, job, W);
  }
  await insertOrders(t.db, [{ key: 'pv-fail-late', at: '2026-05-03T10:30:00Z', amount: 1 }]);
  const ledger = await ledgerOf('pv-fail');

  const failed = await acts.previewWindow({ job: 'pv-fail', windowStart: W.start });
  assert.equal(failed.outcome, 'failed');
  assert.match(previewLines(failed)[0]!, /the handler failed, so would the rerun: the source said no/);
  assert.deepEqual(await ledgerOf('pv-fail'), ledger);

  const set = await acts.previewWindow({ job: 'pv-set', windowStart: W.start });
  assert.equal(set.outcome, 'failed');
  assert.match(set.note!, /would outlast the window's transaction/);
  assert.equal(set.tables, null);

  const refused = await acts.previewWindow({ job: 'pv-outside', windowStart: W.start });
  assert.equal(refused.outcome, 'refused');
  assert.match(refused.note!, /pv-outside is not previewed: it deletes files/);
  assert.equal(outsideRuns, 1, 'the handler ran for generation 0 only');

  await assert.rejects(
    acts.previewWindow({ job: 'pv-fail', windowStart: '2026-05-03T12:00:00Z' }),
    /window pv-fail\/2026-05-03T12:00:00Z has not been processed: nothing to rerun/,
  );
});

test('effects are listed against the generation they replace, and none is recorded', async () => {
  const job = 'pv-mail';
  const W = { start: '2026-05-04T10:00:00Z', end: '2026-05-04T11:00:00Z' };
  const mail = (name: string) => ({
    name,
    channel: 'email' as const,
    request: { to: ['ops@example.test'], subject: name, text: 'x' },
  });
  const acts = activitiesFor([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      // No tables declared: effects only.
      writes: undefined,
      handler: async (ctx) => ({
        ...(await summariseWindow(ctx)),
        effects: ctx.generation > 0 ? [mail('report'), mail('correction')] : [mail('report'), mail('digest')],
      }),
    }),
  ]);
  await insertOrders(t.db, ordersBetween(job, W.start, W.end, 2));
  await processed(acts, job, W);
  const effects = await t.db.selectFrom('effects').select('effect_key').where('job', '=', job).execute();
  const p = await acts.previewWindow({ job, windowStart: W.start });
  assert.deepEqual(p.effects, { repeat: ['report'], added: ['correction'], dropped: ['digest'] });
  assert.equal(p.tables, null);
  assert.deepEqual(previewLines(p).slice(1), [
    'tables not declared by the job: effects only',
    'would send again: report; new: correction',
    'sent before, not again: digest',
  ]);
  assert.deepEqual(
    await t.db.selectFrom('effects').select('effect_key').where('job', '=', job).execute(),
    effects,
    'no effect recorded by the preview',
  );
});

test('a large change is bounded: 20 rows per table with the counts, a few on Slack, the digest over every row', async () => {
  const job = 'pv-many';
  const W = { start: '2026-05-05T10:00:00Z', end: '2026-05-05T11:00:00Z' };
  let extra = 5;
  const acts = activitiesFor([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        // A rerun that writes a summary row per day for 30 days (the last 10 with `extra`).
        if (ctx.generation > 0)
          await sql`insert into ${demo.daily_sales} (job, day, order_count, total)
                    select ${job}, d::date, 1, case when d > '2026-01-20' then ${extra} else 5 end from generate_series('2026-01-01'::date, '2026-01-30'::date, '1 day') d`.execute(
            ctx.trx,
          );
        return counts;
      },
    }),
  ]);
  await insertOrders(t.db, ordersBetween(job, W.start, W.end, 2));
  await processed(acts, job, W);
  const p = await acts.previewWindow({ job, windowStart: W.start });
  const table = p.tables![0]!;
  assert.deepEqual([table.added, table.changed, table.rows.length], [30, 0, 20]);
  assert.deepEqual(table.rows[0]!.key, { job, day: '2026-01-01' }, 'by key');
  const lines = previewLines(p);
  assert.equal(lines.filter((l) => l.startsWith('  + ')).length, 20);
  assert.ok(lines.includes('  ... and 10 more'));
  const slack = slackPreview(p, undefined);
  assert.equal(slack.split('\n').filter((l) => l.startsWith('  + ')).length, 5);
  assert.ok(slack.length < 2_000, `bounded for Slack: ${slack.length}`);
  // A change in a row past the listed ones still changes the digest.
  extra = 6;
  const p2 = await acts.previewWindow({ job, windowStart: W.start });
  assert.deepEqual(p2.tables![0]!.rows, table.rows, 'the listed rows are the same');
  assert.notEqual(p2.digest, p.digest);
});

test('a preview waits for rows another transaction holds at most 10 s, then says so (retryable), not that the rerun fails', async () => {
  const job = 'pv-locked';
  const W = { start: '2026-05-06T10:00:00Z', end: '2026-05-06T11:00:00Z' };
  const acts = activitiesFor([salesJob(job, { start: W.start, lateness: '0m' })]);
  await insertOrders(t.db, ordersBetween(job, W.start, W.end, 2));
  await processed(acts, job, W);
  const release = await holding(t.db, (trx) =>
    sql`select 1 from ${demo.daily_sales} where job = ${job} for update`.execute(trx),
  );
  try {
    await assert.rejects(
      acts.previewWindow({ job, windowStart: W.start }),
      (e: Error & { type?: string; nonRetryable?: boolean }) =>
        (e.type === 'PreviewLocked' &&
          !e.nonRetryable &&
          /locked by another transaction for 10 s \(a run of pv-locked in progress\?\)/.test(e.message)) ||
        assert.fail(String(e)),
    );
  } finally {
    await release();
  }
  assert.equal((await acts.previewWindow({ job, windowStart: W.start })).outcome, 'ok');
});

test('a column that takes a new value at every run (clock_timestamp) is declared volatile: previews of the same data agree', async () => {
  const W = { start: '2026-05-09T10:00:00Z', end: '2026-05-09T11:00:00Z' };
  await sql`create table if not exists public.pv_stamped (job text, day date, n int, stamped_at timestamptz, primary key (job, day))`.execute(
    t.db,
  );
  const stamping = (name: string, volatile?: string[]) =>
    salesJob(name, {
      start: W.start,
      lateness: '0m',
      writes: [{ table: 'public.pv_stamped', key: ['job', 'day'], ...(volatile ? { volatile } : {}) }],
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        await sql`insert into public.pv_stamped values (${ctx.job.name}, ${ctx.window.start}::date, ${ctx.generation}, clock_timestamp())
                  on conflict (job, day) do update set n = excluded.n, stamped_at = excluded.stamped_at`.execute(
          ctx.trx,
        );
        return counts;
      },
    });
  const acts = activitiesFor([stamping('pv-stamp'), stamping('pv-stamp-v', ['stamped_at'])]);
  for (const job of ['pv-stamp', 'pv-stamp-v']) {
    await insertOrders(t.db, ordersBetween(job, W.start, W.end, 3));
    await processed(acts, job, W);
  }
  // Undeclared, the clock makes every preview a different change: no approval could ever match.
  const a = await acts.previewWindow({ job: 'pv-stamp', windowStart: W.start });
  const b = await acts.previewWindow({ job: 'pv-stamp', windowStart: W.start });
  assert.notEqual(a.digest, b.digest);
  // Declared volatile: left out of the comparison, so the same data previews the same change.
  const c = await acts.previewWindow({ job: 'pv-stamp-v', windowStart: W.start });
  const d = await acts.previewWindow({ job: 'pv-stamp-v', windowStart: W.start });
  assert.equal(c.digest, d.digest);
  const row = c.tables!.find((x) => x.table === 'public.pv_stamped')!.rows[0]!;
  assert.deepEqual([row.before!.n, row.after!.n], ['0', '1']);
  assert.equal(row.after!.stamped_at, undefined, 'the volatile column is not listed');
});

// What a handler can make outlast the preview's rolled-back transaction, and what the preview's rows
// carry out of it. On a database of its own.
describe('what a handler can make outlast the preview, and what its rows carry out of it', () => {
  const pgLiteral = (v: string) => pg.escapeLiteral(v);

  let t: TestDb;
  before(async () => {
    t = await createTestDb();
  });
  after(async () => {
    await t?.drop();
  });

  const SECRET = 'sk_live_hostile_0123456789';

  const activitiesFor = (jobs: JobSpec[]) =>
    directActivities(t.db, jobs, { redact: (text) => text.split(SECRET).join('[redacted]') });

  async function processed(
    acts: ReturnType<typeof activitiesFor>,
    job: string,
    W: { start: string },
    generation = 0,
  ) {
    return await acts.processWindow({
      job,
      start: W.start,
      end: new Date(Date.parse(W.start) + 3_600_000).toISOString(),
      generation,
      key: `${job}/${W.start}${generation ? `#${generation}` : ''}`,
      trigger: generation ? 'rerun' : 'manual',
      policy,
    });
  }

  const markers = async (job: string) =>
    (
      await t.db
        .selectFrom('job_windows')
        .select(['generation', 'status'])
        .where('job', '=', job)
        .orderBy('generation')
        .execute()
    ).map((m) => `${m.generation}:${m.status}`);

  const summaryOf = async (job: string) =>
    (
      await sql<{
        n: number;
      }>`select order_count::int as n from ${demo.daily_sales} where job = ${job}`.execute(t.db)
    ).rows[0]?.n;

  test('a handler that sends COMMIT in the preview: nothing of it is committed, the rerun still runs', async () => {
    const job = 'hp-commit';
    const W = { start: '2026-08-01T10:00:00Z' };
    const acts = activitiesFor([
      salesJob(job, {
        start: W.start,
        lateness: '0m',
        handler: async (ctx) => {
          const counts = await summariseWindow(ctx);
          if (ctx.generation > 0) await sql`commit`.execute(ctx.trx);
          return counts;
        },
      }),
    ]);
    await insertOrders(t.db, ordersBetween(job, W.start, '2026-08-01T11:00:00Z', 4));
    await processed(acts, job, W);
    await insertOrders(t.db, [{ key: `${job}-late`, at: '2026-08-01T10:59:00Z', amount: 1 }]);
    const p = await acts.previewWindow({ job, windowStart: W.start });
    assert.equal(p.outcome, 'failed');
    assert.deepEqual(await markers(job), ['0:done'], 'the preview left no marker of generation 1');
    assert.equal(await summaryOf(job), 4, 'the preview changed no summary');
    // The handler asks again at the real run: refused there too, and the window stays runnable.
    await assert.rejects(processed(acts, job, W, 1), /"commit" would end the window's transaction/);
    assert.deepEqual(await markers(job), ['0:done', '1:failed']);
    assert.equal(await summaryOf(job), 4);
  });

  test("a secret in a row the handler writes stays out of the preview's values", async () => {
    const job = 'hp-secret';
    const W = { start: '2026-08-02T10:00:00Z' };
    await sql`create table public.hp_tokens (job text, day date, token text, primary key (job, day))`.execute(
      t.db,
    );
    const acts = activitiesFor([
      salesJob(job, {
        start: W.start,
        lateness: '0m',
        writes: [{ table: 'public.hp_tokens', key: ['job', 'day'] }],
        handler: async (ctx) => {
          const counts = await summariseWindow(ctx);
          await sql`insert into public.hp_tokens values (${job}, '2026-08-02', ${`token ${SECRET} gen ${ctx.generation}`})
                  on conflict (job, day) do update set token = excluded.token`.execute(ctx.trx);
          return counts;
        },
      }),
    ]);
    await insertOrders(t.db, ordersBetween(job, W.start, '2026-08-02T11:00:00Z', 2));
    await processed(acts, job, W);
    const p = await acts.previewWindow({ job, windowStart: W.start });
    assert.equal(p.outcome, 'ok', p.note);
    assert.equal(p.tables![0]!.changed, 1);
    assert.doesNotMatch(JSON.stringify(p), new RegExp(SECRET));
    assert.match(p.tables![0]!.rows[0]!.after!.token!, /\[redacted\] gen 1/);
  });

  test('a session advisory lock taken by the handler does not outlast the preview on the pooled connection', async () => {
    const job = 'hp-lock';
    const W = { start: '2026-08-03T10:00:00Z' };
    const acts = activitiesFor([
      salesJob(job, {
        start: W.start,
        lateness: '0m',
        handler: async (ctx) => {
          if (ctx.generation > 0) await sql`select pg_advisory_lock(424242)`.execute(ctx.trx);
          return await summariseWindow(ctx);
        },
      }),
    ]);
    await insertOrders(t.db, ordersBetween(job, W.start, '2026-08-03T11:00:00Z', 2));
    await processed(acts, job, W);
    await acts.previewWindow({ job, windowStart: W.start });
    const held = await sql<{ n: number }>`select count(*)::int as n from pg_locks
      where locktype = 'advisory' and objid = 424242 and database = (select oid from pg_database where datname = current_database())`.execute(
      t.db,
    );
    assert.equal(held.rows[0]!.n, 0, 'no advisory lock held after the preview');
  });

  test('twenty changed rows of 10 MB values, bytea, numerics, zones, NULLs and Slack markup: a small, exact, escaped preview', async () => {
    const job = 'hp-odd';
    const W = { start: '2026-08-04T10:00:00Z' };
    await sql`create table public.hp_odd (job text, n int, big text, bin bytea, amount numeric(30, 9), at timestamptz,
              gone text, label text, primary key (job, n))`.execute(t.db);
    const acts = activitiesFor([
      salesJob(job, {
        start: W.start,
        lateness: '0m',
        writes: [{ table: 'public.hp_odd', key: ['job', 'n'] }],
        handler: async (ctx) => {
          const counts = await summariseWindow(ctx);
          // 10 MB per value, made by the server (stored compressed, so the probe stays light on disk).
          await sql`insert into public.hp_odd
                  select ${job}, n, repeat(${String(ctx.generation)}, 10 * 1024 * 1024), decode(${`00ff0${ctx.generation}`}, 'hex'),
                         12345678901234567890.123456789 + ${ctx.generation},
                         '2026-08-04 12:00:00+05:30'::timestamptz + make_interval(hours => ${ctx.generation}),
                         case when ${ctx.generation} = 0 then 'x' end,
                         ${`<!channel> <https://evil|click> \`\`\` *b* ${ctx.generation}`}
                    from generate_series(1, 20) n
                  on conflict (job, n) do update set big = excluded.big, bin = excluded.bin, amount = excluded.amount,
                     at = excluded.at, gone = excluded.gone, label = excluded.label`.execute(ctx.trx);
          return counts;
        },
      }),
    ]);
    await insertOrders(t.db, ordersBetween(job, W.start, '2026-08-04T11:00:00Z', 2));
    const first = Date.now();
    await processed(acts, job, W);
    const run = Date.now() - first;
    const began = Date.now();
    const peak = process.resourceUsage().maxRSS;
    const p = await acts.previewWindow({ job, windowStart: W.start });
    const ms = Date.now() - began;
    // The 400 MB of values the rows hold stay in the server: only their first characters come over.
    const grew = Math.round((process.resourceUsage().maxRSS - peak) / 1024);
    assert.ok(grew < 200, `the worker's peak memory grew by ${grew} MB during the preview`);
    assert.equal(p.outcome, 'ok', p.note);
    const size = JSON.stringify(p).length;
    assert.ok(size < 64 * 1024, `the preview is ${size} characters`);
    const [tbl] = p.tables!;
    assert.equal(tbl!.changed, 20);
    assert.equal(tbl!.rows.length, 20);
    const r = tbl!.rows[0]!;
    assert.equal(r.after!.amount, '12345678901234567891.123456789');
    assert.equal(r.after!.at, '2026-08-04T07:30:00+00:00');
    assert.equal(r.after!.bin, '\\x00ff01');
    assert.equal(r.after!.gone, null);
    assert.equal(r.before!.gone, 'x');
    assert.equal(r.after!.big!.length, 123);
    const slack = (await import('../../../contract/preview-text.js')).slackPreview(p, undefined);
    assert.ok(slack.length < 3000, `${slack.length}`);
    assert.doesNotMatch(slack, /<!channel>|<https:/);
    // The page shows the value as text (built without innerHTML); Slack gets it escaped.
    assert.equal(r.after!.label, '<!channel> <https://evil|click> ``` *b* 1');
    process.stdout.write(
      `# figures: generation 0 run ${run} ms, preview ${ms} ms (peak memory +${grew} MB), json ${size} chars, slack ${slack.length} chars\n`,
    );
  });

  test("a preview holding the day's summary row while a tick of the same day commits: the tick waits for it, then both end, no deadlock", async () => {
    const job = 'hp-concurrent';
    const W10 = { start: '2026-08-05T10:00:00Z' };
    const W11 = { start: '2026-08-05T11:00:00Z' };
    let release!: () => void;
    let paused!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inside = new Promise<void>((r) => (paused = r));
    const acts = activitiesFor([
      salesJob(job, {
        start: W10.start,
        lateness: '0m',
        handler: async (ctx) => {
          const counts = await summariseWindow(ctx);
          if (ctx.generation > 0) {
            paused();
            await gate;
          }
          return counts;
        },
      }),
    ]);
    await insertOrders(t.db, ordersBetween(job, W10.start, '2026-08-05T12:00:00Z', 6));
    await processed(acts, job, W10);
    const preview = acts.previewWindow({ job, windowStart: W10.start });
    await inside;
    const tick = processed(acts, job, W11);
    // The tick's update of the day's row waits on the preview's (no sleep: the server says so).
    await eventually(
      async () =>
        (
          await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`.execute(t.db)
        ).rows[0]!.n > 0 || undefined,
      20_000,
      'the tick waiting on the preview',
    );
    release();
    const [p, r] = await Promise.all([preview, tick]);
    assert.equal(p.outcome, 'ok', p.note);
    assert.equal(r.outcome, 'processed');
    assert.equal(await summaryOf(job), 6, "both hours' orders, none of the preview's");
    assert.deepEqual(await markers(job), ['0:done', '0:done']);
  });

  test("a wide table's preview stays small enough for the workflow's history (Temporal refuses a payload over 2 MB)", async () => {
    const job = 'hp-wide';
    const W = { start: '2026-08-06T10:00:00Z' };
    const columns = Array.from({ length: 400 }, (_, i) => `c${i}`);
    await sql`${sql.raw(`create table public.hp_wide (job text, n int, ${columns.map((c) => `${c} text`).join(', ')}, primary key (job, n))`)}`.execute(
      t.db,
    );
    const acts = activitiesFor([
      salesJob(job, {
        start: W.start,
        lateness: '0m',
        writes: [
          { table: 'public.hp_wide', key: ['job', 'n'] },
          { table: demoTable('daily_sales'), key: ['job', 'day'] },
        ],
        handler: async (ctx) => {
          const counts = await summariseWindow(ctx);
          const v = `repeat(${ctx.generation}::text, 200)`;
          await sql`${sql.raw(`insert into public.hp_wide select ${pgLiteral(job)}, n, ${columns.map(() => v).join(', ')}
            from generate_series(1, 20) n
            on conflict (job, n) do update set ${columns.map((c) => `${c} = excluded.${c}`).join(', ')}`)}`.execute(
            ctx.trx,
          );
          return counts;
        },
      }),
    ]);
    await insertOrders(t.db, ordersBetween(job, W.start, '2026-08-06T11:00:00Z', 2));
    await processed(acts, job, W);
    await insertOrders(t.db, [{ key: `${job}-late`, at: '2026-08-06T10:59:00Z', amount: 3 }]);
    const p = await acts.previewWindow({ job, windowStart: W.start });
    assert.equal(p.outcome, 'ok', p.note);
    const size = Buffer.byteLength(JSON.stringify(p));
    assert.ok(size <= 256 * 1024, `the preview is ${Math.round(size / 1024)} KB`);
    const [wide, sales] = p.tables!;
    assert.equal(wide!.changed, 20, 'the counts cover every row');
    assert.ok(wide!.rows.length >= 1, 'some rows listed');
    assert.equal(sales!.rows.length, 1, "the next table's change is listed too");
    assert.match(
      previewLines(p).join('\n'),
      /~ job=hp-wide n=1: c0 0+\.\.\. -> 1+\.\.\., .*, c29 .*, and 370 more columns\n/,
    );
  });
});
