// Done spans, second review: readers that must not lose a compacted window (the status command, effects
// in doubt, a rerun's preview of the sales summary), compaction not starved by a busy job's current
// windows (the claim takes the span lock only for windows that could be in a span).
import { handlerTransaction } from '../../../activities/window-transaction.js';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { run } from '../../../cli/main.js';
import { compactDoneMarkers } from '../../../db/compaction.js';
import { watermarkOf } from '../../../db/ledger.js';
import { summariseWindow } from '../../../jobs/sales-summary.js';
import { effectsInDoubt } from '../../../operator/effects.js';
import { type WindowContext } from '../../../schedules/job.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';
import { insertOrders, salesJob } from '../../helpers/jobs.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = Date.parse('2025-03-01T00:00:00Z');
const at = (i: number) => new Date(T0 + i * HOUR);
const iso = (d: Date) => d.toISOString().replace('.000Z', 'Z');
const FAR = new Date('2030-01-01T00:00:00Z');
let t: TestDb;

before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

/** The hourly windows starting at `starts`, done at generation 0 with keys as windowKey makes them. */
async function markDone(job: string, starts: Date[]): Promise<void> {
  await t.db
    .insertInto('job_windows')
    .values(
      starts.map((s) => ({
        job,
        window_start: s,
        generation: 0,
        window_end: new Date(s.getTime() + HOUR),
        window_key: `${job}/${iso(s)}`,
        status: 'done',
        attempts: 2,
        trigger: 'tick',
        workflow_id: null,
        started_at: s,
        finished_at: s,
        reason: null,
      })),
    )
    .execute();
}

const hours = (from: number, n: number, base = T0) =>
  Array.from({ length: n }, (_, i) => new Date(base + (from + i) * HOUR));

async function jobAt(job: string, watermark: Date): Promise<void> {
  await watermarkOf(t.db, job, watermark);
  await sql`update ${tm.job_watermarks} set watermark = ${watermark} where job = ${job}`.execute(t.db);
}

const markers = async (job: string) =>
  (
    await t.db
      .selectFrom('job_windows')
      .select(['window_start', 'window_end'])
      .where('job', '=', job)
      .orderBy('window_start')
      .execute()
  ).map((r) => ({ start: r.window_start.getTime(), end: r.window_end.getTime() }));

const spans = async (job: string) =>
  (
    await t.db
      .selectFrom('job_done_spans')
      .select(['span_start', 'span_end'])
      .where('job', '=', job)
      .orderBy('span_start')
      .execute()
  ).map((r) => ({ start: r.span_start.getTime(), end: r.span_end.getTime() }));

async function session(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: t.url });
  await c.connect();
  return c;
}

/** Begins a window transaction on `c` and claims [start, start + 1 h) in it, left open. */
async function claimOpen(c: pg.Client, job: string, start: Date): Promise<number | null> {
  await c.query('begin');
  const r = await c.query<{ a: number | null }>(
    `select ${SCHEMA}.tidemark_claim_window($1, $2, 0, $3, $4, 'tick', 'wf', now(), '60000', '120000') as a`,
    [job, start, new Date(start.getTime() + HOUR), `${job}/${iso(start)}`],
  );
  return r.rows[0]!.a;
}

test('a window transaction of a current window held open does not keep compaction from folding old windows', async () => {
  const job = 'readers-busy';
  const hour = Math.floor(Date.now() / HOUR) * HOUR;
  await markDone(job, hours(0, 6));
  await jobAt(job, new Date(hour));
  const busy = await session();
  try {
    // The job's current window runs (a long one, or a backfill's): its transaction is open.
    assert.equal(await claimOpen(busy, job, new Date(hour - HOUR)), 1);
    const r = await compactDoneMarkers(t.db, { cutoff: FAR, job, lockTimeoutMs: 1_000 });
    assert.equal(r.windows, 6, 'the old windows are folded while the current one runs');
    await busy.query('commit');
  } finally {
    await busy.end();
  }
  assert.deepEqual(await spans(job), [{ start: at(0).getTime(), end: at(6).getTime() }]);
});

test('a window transaction of an old window still holds compaction of its job off', async () => {
  const job = 'readers-old-claim';
  await markDone(job, hours(0, 6));
  await jobAt(job, at(7));
  const c = await session();
  try {
    assert.equal(await claimOpen(c, job, at(6)), 1, 'window 6 (a backfill of an old window) claimed');
    let busy = 0;
    await assert.rejects(
      compactDoneMarkers(t.db, { cutoff: FAR, job, lockTimeoutMs: 300, onBusy: () => busy++ }),
      /held its span lock/,
    );
    assert.ok(busy > 0);
    await c.query('commit');
  } finally {
    await c.end();
  }
  assert.equal((await compactDoneMarkers(t.db, { cutoff: FAR, job })).windows, 7);
  assert.deepEqual(await spans(job), [{ start: at(0).getTime(), end: at(7).getTime() }]);
});

test('compaction never folds a window that ended less than a day ago, whatever cutoff it is given', async () => {
  const job = 'readers-recent';
  const hour = Math.floor(Date.now() / HOUR) * HOUR;
  await markDone(job, hours(-30, 30, hour)); // ending one to thirty hours ago
  await jobAt(job, new Date(hour));
  const before = Date.now();
  await compactDoneMarkers(t.db, { cutoff: FAR, job });
  const folded = await spans(job);
  assert.equal(folded.length, 1);
  assert.ok(folded[0]!.end <= Date.now() - DAY, `span ends ${new Date(folded[0]!.end).toISOString()}`);
  const left = await markers(job);
  assert.ok(left.length >= 23, `${left.length} markers left`);
  assert.ok(
    left.every((m) => m.end > before - DAY),
    'every marker of a window that ended within the day is left',
  );
  assert.equal(left[0]!.start, folded[0]!.end, 'the span and the markers left meet: nothing lost');
});

test('tidemark status of a job whose windows were all compacted says they are done, not "no windows yet"', async () => {
  const job = 'sales-hourly'; // a job of the demo catalog, as the CLI knows it
  await markDone(job, hours(0, 6));
  await jobAt(job, at(6));
  await compactDoneMarkers(t.db, { cutoff: FAR, job });
  const out: string[] = [];
  const err: string[] = [];
  process.env.DATABASE_URL = t.url;
  const code = await run(['status', job], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
    json: false,
    tty: false,
  });
  assert.equal(code, 0, err.join('\n'));
  const text = out.join('\n');
  assert.doesNotMatch(text, /no windows yet/);
  assert.match(
    text,
    /windows from 2025-03-01T00:00:00Z to 2025-03-01T06:00:00Z are done \(their markers were compacted\)/,
  );
});

test('an effect in doubt of a compacted window still names the window it belongs to', async () => {
  const job = 'readers-effects';
  const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: iso(at(0)) })]);
  await markDone(job, hours(0, 6));
  await jobAt(job, at(6));
  const key = `${job}/${iso(at(2))}`;
  await t.db
    .insertInto('effects')
    .values({
      effect_key: `${key}:report`,
      job,
      window_key: key,
      name: 'report',
      channel: 'email',
      policy: 'ask',
      status: 'unknown',
      request: JSON.stringify({ to: 'ops@example.test' }),
      provider_key: `${key}:report`,
    })
    .execute();
  const shown = async () => (await effectsInDoubt(t.db, { job }, catalog)).find((e) => e.window === key);
  const before = await shown();
  assert.deepEqual([before?.windowStart, before?.windowEnd, before?.generation], [iso(at(2)), iso(at(3)), 0]);
  await compactDoneMarkers(t.db, { cutoff: FAR, job });
  const after = await shown();
  assert.deepEqual(
    [after?.windowStart, after?.windowEnd, after?.generation],
    [iso(at(2)), iso(at(3)), 0],
    'the window of an effect in doubt is found in its span',
  );
});

test('a rerun (its preview) of a compacted sales window replaces generation 0, not adds to it', async () => {
  const job = 'readers-sales';
  const spec = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: iso(at(0)) })]).get(job);
  await insertOrders(t.db, [
    { key: 'rs-1', at: '2025-03-01T02:10:00Z', amount: 10 },
    { key: 'rs-2', at: '2025-03-01T02:20:00Z', amount: 5 },
  ]);
  const window = { start: at(2), end: at(3) };
  const runAs = (generation: number) =>
    t.db.transaction().execute((trx) =>
      summariseWindow({
        ...handlerTransaction(trx, { job, start: window.start, generation }),
        job: spec,
        window,
        key: `${job}/${iso(at(2))}${generation ? `#${generation}` : ''}`,
        generation,
        attempt: 1,
        log: () => {},
      } as unknown as WindowContext),
    );
  await runAs(0);
  await markDone(job, hours(0, 6));
  await jobAt(job, at(6));
  await compactDoneMarkers(t.db, { cutoff: FAR, job });
  assert.equal((await markers(job)).length, 0);
  await runAs(1);
  const day = await t.db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('daily_sales')
    .select(['order_count', 'total'])
    .where('job', '=', job)
    .executeTakeFirstOrThrow();
  assert.deepEqual([Number(day.order_count), Number(day.total)], [2, 15], 'the day counts its orders once');
});
