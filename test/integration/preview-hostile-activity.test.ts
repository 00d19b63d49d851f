// Hostile review of the rerun preview's activity (issue 12) on a real PostgreSQL: what a handler
// can make outlast the rolled-back transaction, and what the preview's rows carry out of it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { summariseWindow } from '../../jobs/sales-summary.js';
import type { JobSpec } from '../../schedules/job.js';
import { previewLines } from '../../contract/preview-text.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { insertOrders, ordersBetween, salesJob } from '../helpers/jobs.js';
import { directActivities } from '../helpers/windows.js';
import { policy } from '../helpers/reruns.js';
import pg from 'pg';
const pgLiteral = (v: string) => pg.escapeLiteral(v);
import { eventually } from '../helpers/temporal.js';

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
  (await sql<{ n: number }>`select order_count::int as n from daily_sales where job = ${job}`.execute(t.db))
    .rows[0]?.n;

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
  await sql`create table hp_tokens (job text, day date, token text, primary key (job, day))`.execute(t.db);
  const acts = activitiesFor([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      writes: [{ table: 'hp_tokens', key: ['job', 'day'] }],
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        await sql`insert into hp_tokens values (${job}, '2026-08-02', ${`token ${SECRET} gen ${ctx.generation}`})
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
  await sql`create table hp_odd (job text, n int, big text, bin bytea, amount numeric(30, 9), at timestamptz,
              gone text, label text, primary key (job, n))`.execute(t.db);
  const acts = activitiesFor([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      writes: [{ table: 'hp_odd', key: ['job', 'n'] }],
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        // 10 MB per value, made by the server (stored compressed, so the probe stays light on disk).
        await sql`insert into hp_odd
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
  const slack = (await import('../../contract/preview-text.js')).slackPreview(p, undefined);
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
  await sql`${sql.raw(`create table hp_wide (job text, n int, ${columns.map((c) => `${c} text`).join(', ')}, primary key (job, n))`)}`.execute(
    t.db,
  );
  const acts = activitiesFor([
    salesJob(job, {
      start: W.start,
      lateness: '0m',
      writes: [
        { table: 'hp_wide', key: ['job', 'n'] },
        { table: 'daily_sales', key: ['job', 'day'] },
      ],
      handler: async (ctx) => {
        const counts = await summariseWindow(ctx);
        const v = `repeat(${ctx.generation}::text, 200)`;
        await sql`${sql.raw(`insert into hp_wide select ${pgLiteral(job)}, n, ${columns.map(() => v).join(', ')}
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
