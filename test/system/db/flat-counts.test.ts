// Counts kept as windows and effects change (issue 14, migration 20261201T2000): the overview's
// done / failed / missing and the /metrics effects gauge read delta rows a trigger keeps, not the
// history. Their semantics through rerun generations, compaction, a span put back, a deletion and
// housekeeping's folding, checked against the history itself at each step; and two window
// transactions of one job that count and fold at the same time without waiting on each other. And the
// cases where counts and history came apart: a job all of whose markers were folded, a span removed by
// hand, a fold committing while the recount migration (20261201T2100, the span lock horizon) runs.
import assert from 'node:assert/strict';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { compactDoneMarkers, expandWindow } from '../../../db/compaction.js';
import { recordEffects } from '../../../db/effects.js';
import type { Database } from '../../../db/schema.js';
import { claimWindow, failAttempt, watermarkOf } from '../../../db/ledger.js';
import { housekeeping, HOUSEKEEPING_JOB } from '../../../jobs/housekeeping/index.js';
import { jobHealth } from '../../../operator/job-health.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createMetrics } from '../../../workers/metrics.js';
import { createTestDb, SCHEMA, tm } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';
import { migrateTo } from '../../helpers/schema-catalog.js';
import { realStack } from '../../helpers/temporal.js';
import { countsFromHistory } from '../../helpers/window-counts.js';

const stack = realStack();
const HOUR = 3_600_000;
const T0 = Date.parse('2025-03-01T00:00:00Z');
const at = (i: number) => new Date(T0 + i * HOUR);
const iso = (i: number) => at(i).toISOString().replace('.000Z', 'Z');
const FAR = new Date('2030-01-01T00:00:00Z');
/** Ten closed hourly windows, [0, 10). */
const NOW = at(10);

const ref = (job: string, i: number, generation = 0) => ({
  job,
  start: at(i),
  end: at(i + 1),
  generation,
  key: `${job}/${iso(i)}`,
});

const claim = (job: string, i: number, generation = 0) =>
  stack.t.db
    .transaction()
    .execute((trx) =>
      claimWindow(trx, ref(job, i, generation), { trigger: 'schedule', workflowId: null, at: NOW }),
    );

const fail = (job: string, i: number, generation = 0, db: Parameters<typeof failAttempt>[0] = stack.t.db) =>
  failAttempt(db, ref(job, i, generation), {
    trigger: 'schedule',
    workflowId: null,
    at: NOW,
    reason: 'handler error',
  });

const fromHistory = (job: string, db: Kysely<Database> = stack.t.db) => countsFromHistory(db, job);

async function health(job: string, db: Kysely<Database> = stack.t.db) {
  const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: iso(0) })]);
  const h = await jobHealth(db, stack.env.client, catalog.get(job), NOW);
  return { done: h.done, failed: h.failed, missing: h.missing };
}

async function expectHealth(
  job: string,
  expected: { done: number; failed: number; missing: number },
  step: string,
) {
  assert.deepEqual(await fromHistory(job), expected, `${step}: the history says so`);
  assert.deepEqual(await health(job), expected, `${step}: the overview's counts`);
}

const deltaRows = async (job: string) =>
  Number(
    (
      await sql<{
        n: string;
      }>`select count(*) as n from ${tm.job_window_counts} where job = ${job}`.execute(stack.t.db)
    ).rows[0]!.n,
  );

test('the counts follow latest generations, compaction, a span put back, a deletion and housekeeping', async () => {
  const job = 'counts-gens';
  // Windows 0-5 done in one statement (as a bulk load), 6 failed, 7 claimed done; 8 and 9 missing.
  await sql`
    insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at, finished_at)
    select ${job}, ${at(0)}::timestamptz + i * interval '1 hour', 0, ${at(0)}::timestamptz + (i + 1) * interval '1 hour',
           ${job} || '/' || to_char((${at(0)}::timestamptz + i * interval '1 hour') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           'done', 1, 'tick', now(), now()
      from generate_series(0, 5) i`.execute(stack.t.db);
  await fail(job, 6);
  await claim(job, 7);
  await expectHealth(job, { done: 7, failed: 1, missing: 2 }, 'first runs');

  await claim(job, 6);
  await expectHealth(job, { done: 8, failed: 0, missing: 2 }, 'the failed window retried and done');

  // Rerun generations: the latest one decides, whatever the one before it was.
  await fail(job, 2, 1);
  await claim(job, 3, 1);
  await expectHealth(job, { done: 7, failed: 1, missing: 2 }, 'a rerun generation 1 failed, another done');
  await fail(job, 2, 1);
  await expectHealth(job, { done: 7, failed: 1, missing: 2 }, 'the failed generation failing again');

  await watermarkOf(stack.t.db, job, at(8));
  await sql`update ${tm.job_watermarks} set watermark = ${at(8)} where job = ${job}`.execute(stack.t.db);
  const folded = await compactDoneMarkers(stack.t.db, { cutoff: FAR, job });
  assert.equal(folded.windows, 6, 'windows 0, 1, 4, 5, 6, 7 folded (2 and 3 have generation 1)');
  assert.equal(
    (await stack.t.db.selectFrom('job_windows').select('window_start').where('job', '=', job).execute())
      .length,
    4,
    'their rows deleted',
  );
  await expectHealth(job, { done: 7, failed: 1, missing: 2 }, 'after compaction deleted six markers');

  // A rerun request puts a compacted window's marker back (its transaction), then nothing else.
  const back = await stack.t.db.transaction().execute(async (trx) => {
    const put = await expandWindow(trx, { job, start: at(0), end: at(1), key: `${job}/${iso(0)}` });
    await fail(job, 9, 0, trx); // a write after it in the same transaction is counted as ever
    return put;
  });
  assert.equal(back, true);
  await expectHealth(
    job,
    { done: 7, failed: 2, missing: 1 },
    'a marker put back from its span, window 9 failed',
  );

  // A generation's row deleted by hand: the one before it is the latest again.
  await sql`delete from ${tm.job_windows} where job = ${job} and window_start = ${at(2)} and generation = 1`.execute(
    stack.t.db,
  );
  await expectHealth(job, { done: 8, failed: 1, missing: 1 }, 'the failed generation 1 of window 2 deleted');

  // Housekeeping's window: folds the marker put back into a span again, and folds the counts.
  assert.ok((await deltaRows(job)) > 2, 'delta rows before housekeeping');
  const hk = defineCatalog([
    housekeeping({ stateDir: await mkdtemp(join(tmpdir(), 'flat-counts-')), retention: { markers: '1d' } }),
  ]).get(HOUSEKEEPING_JOB);
  const lines: string[] = [];
  await hk.prepare!({
    db: stack.t.db.withoutPlugins(),
    ledger: stack.t.db,
    job: hk,
    window: { start: FAR, end: new Date(FAR.getTime() + 86_400_000) },
    key: `${HOUSEKEEPING_JOB}/2030-01-01T00:00:00Z`,
    generation: 0,
    heartbeat: () => undefined,
    log: (l) => lines.push(l),
  });
  assert.ok(
    lines.some((l) => /HOUSEKEEPING folded .* markers=[1-9]/.test(l)),
    `housekeeping folded markers: ${lines.join('\n')}`,
  );
  assert.ok(
    lines.some((l) => /HOUSEKEEPING counts folded/.test(l)),
    lines.join('\n'),
  );
  await expectHealth(job, { done: 8, failed: 1, missing: 1 }, 'after housekeeping');
  assert.equal(await deltaRows(job), 2, 'one row per status left: done and failed');
});

test("the effects gauge follows inserts, state changes and deletions without reading the effects' history", async () => {
  const effect = (name: string, channel: string) => ({
    key: `fx/${name}`,
    job: 'fx',
    windowKey: 'fx/2025-03-01T00:00:00Z',
    name,
    channel,
    policy: 'ask' as const,
    request: {},
    providerKey: `fx/${name}`,
  });
  await recordEffects(
    stack.t.db,
    ['a', 'b', 'c', 'd'].map((n) => effect(n, 'email')),
  );
  await recordEffects(stack.t.db, [effect('e', 'slack'), effect('f', 'slack')]);
  await stack.t.db
    .updateTable('effects')
    .set({ status: 'done' })
    .where('name', 'in', ['a', 'b', 'e'])
    .execute();
  await stack.t.db.updateTable('effects').set({ status: 'unknown' }).where('name', '=', 'c').execute();
  await stack.t.db.updateTable('effects').set({ last_error: 'x' }).where('name', '=', 'd').execute();
  await stack.t.db.deleteFrom('effects').where('name', '=', 'f').execute();
  const gauge = async () => {
    const m = createMetrics({ db: stack.t.db, catalog: defineCatalog([]), now: () => NOW });
    const json = await m.registry.getMetricsAsJSON();
    return (json.find((x) => x.name === 'tidemark_effects')?.values ?? [])
      .map((v) => `${v.labels.state} ${v.labels.channel} ${v.value}`)
      .sort();
  };
  const truth = (
    await sql<{
      s: string;
    }>`select status || ' ' || channel || ' ' || count(*) as s from ${tm.effects} where job = 'fx' group by status, channel`.execute(
      stack.t.db,
    )
  ).rows
    .map((r) => r.s)
    .sort();
  assert.deepEqual(truth, ['done email 2', 'done slack 1', 'pending email 1', 'unknown email 1']);
  assert.deepEqual(await gauge(), truth);
  await sql`select ${tm.fn('tidemark_fold_effect_counts')}()`.execute(stack.t.db);
  assert.deepEqual(await gauge(), truth, 'the same after folding');
  assert.equal(
    Number(
      (await sql<{ n: string }>`select count(*) as n from ${tm.effect_counts}`.execute(stack.t.db)).rows[0]!
        .n,
    ),
    4,
    'one row per state and channel with effects',
  );
});

test('two transactions committing windows of one job count (and fold) without waiting on each other', async () => {
  const job = 'counts-race';
  await claim(job, 0);
  const a = new pg.Client({ connectionString: stack.t.url });
  const b = new pg.Client({ connectionString: stack.t.url });
  await a.connect();
  await b.connect();
  const claimSql = `select ${SCHEMA}.tidemark_claim_window($1, $2, 0, $3, $4, 'schedule', 'wf', now(), null, null)`;
  const fold = `select ${SCHEMA}.tidemark_fold_window_counts($1)`;
  try {
    const pidB = (await b.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    await a.query('begin');
    await a.query(claimSql, [job, at(1), at(2), `${job}/${iso(1)}`]);
    await a.query(fold, [job]); // holds the job's delta rows it folded until it commits
    // A wait would be an error here, not a hang.
    await b.query(`begin; set local lock_timeout = '3s'`);
    await b.query(claimSql, [job, at(2), at(3), `${job}/${iso(2)}`]);
    await b.query(
      `insert into ${SCHEMA}.job_windows (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at)
       values ($1, $2, 0, $3, $4, 'failed', 1, 'schedule', now())`,
      [job, at(3), at(4), `${job}/${iso(3)}`],
    );
    await b.query(fold, [job]);
    const waiting = await sql<{
      n: number;
    }>`select count(*)::int as n from pg_locks where pid = ${pidB} and not granted`.execute(stack.t.db);
    assert.equal(waiting.rows[0]!.n, 0, 'the second transaction waits on no lock');
    await b.query('commit');
    // The first one is still open: its window not committed, the second's are.
    const seen = await stack.t.db
      .selectFrom('job_windows')
      .select('window_start')
      .where('job', '=', job)
      .orderBy('window_start')
      .execute();
    assert.deepEqual(
      seen.map((r) => r.window_start.toISOString()),
      [at(0), at(2), at(3)].map((d) => d.toISOString()),
      'the second committed while the first is still open',
    );
    assert.deepEqual(await health(job), { done: 2, failed: 1, missing: 7 }, 'a reader meanwhile');
    await a.query('commit');
  } finally {
    await a.end();
    await b.end();
  }
  assert.deepEqual(await fromHistory(job), { done: 3, failed: 1, missing: 6 });
  assert.deepEqual(await health(job), { done: 3, failed: 1, missing: 6 }, 'the counts after both committed');
  await sql`select ${tm.fn('tidemark_fold_window_counts')}(${job})`.execute(stack.t.db);
  assert.deepEqual(await health(job), { done: 3, failed: 1, missing: 6 }, 'and after folding');
  assert.equal(await deltaRows(job), 2);
});

test('the migration counts the windows, spans and effects already there', async () => {
  const t = await createTestDb({ migrated: false });
  try {
    await migrateTo(t.db, '20261201T1000_scale_indexes');
    const job = 'counts-backfill';
    // Windows 0-6 at generation 0 (6 failed), window 2's generation 1 failed, 7-8 in a span, 9 missing.
    await sql`
      insert into ${tm.job_windows} (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at)
      select ${job}, ${at(0)}::timestamptz + i * interval '1 hour', g, ${at(0)}::timestamptz + (i + 1) * interval '1 hour',
             ${job} || '/' || i, case when i = 6 or g = 1 then 'failed' else 'done' end, 1, 'tick', now()
        from generate_series(0, 6) i cross join generate_series(0, 1) g
       where g = 0 or i = 2`.execute(t.db);
    await sql`insert into ${tm.job_done_spans} (job, span_start, span_end) values (${job}, ${at(7)}, ${at(9)})`.execute(
      t.db,
    );
    await sql`
      insert into ${tm.effects} (effect_key, job, name, channel, policy, status, request, provider_key)
      select 'fx/' || i, 'fx', 'n', case when i < 3 then 'email' else 'slack' end, 'ask',
             case when i % 2 = 0 then 'done' else 'pending' end, '{}'::jsonb, 'fx/' || i
        from generate_series(0, 4) i`.execute(t.db);
    await migrateTo(t.db, 'latest');
    const expected = { done: 7, failed: 2, missing: 1 };
    assert.deepEqual(await fromHistory(job, t.db), expected);
    assert.deepEqual(await health(job, t.db), expected);
    const effects = await sql<{ s: string }>`
      select status || ' ' || channel || ' ' || sum(n) as s from ${tm.effect_counts} group by status, channel order by 1`.execute(
      t.db,
    );
    assert.deepEqual(
      effects.rows.map((r) => r.s),
      ['done email 2', 'done slack 1', 'pending email 1', 'pending slack 1'],
    );
  } finally {
    await t.drop();
  }
});

// The counts against the history (the overview's old full query) where they came apart, with the span
// lock horizon (20261201T2100). On a Temporal namespace and database of their own.
describe('the counts against the history: a job folded whole, a span removed by hand, a recount racing a fold', () => {
  const stack = realStack();
  const HOUR = 3_600_000;
  const T0 = Date.parse('2025-03-01T00:00:00Z');
  const at = (i: number) => new Date(T0 + i * HOUR);
  const iso = (i: number) => at(i).toISOString().replace('.000Z', 'Z');
  /** Ten closed hourly windows, [0, 10). */
  const NOW = at(10);

  const fromHistory = (job: string, db: Kysely<Database>) => countsFromHistory(db, job);

  async function health(job: string, db: Kysely<Database>) {
    const catalog = defineCatalog([salesJob(job, { grid: '1h', lateness: '0m', start: iso(0) })]);
    const h = await jobHealth(db, stack.env.client, catalog.get(job), NOW);
    return { done: h.done, failed: h.failed, missing: h.missing };
  }

  test('the migration counts the spans of a job all of whose markers were folded (no window rows left)', async () => {
    const t = await createTestDb({ migrated: false });
    try {
      await migrateTo(t.db, '20261201T1000_scale_indexes');
      // A job that stopped running a while ago: housekeeping folded every marker; windows 0-8 in spans.
      const job = 'counts-all-folded';
      await sql`insert into ${tm.job_done_spans} (job, span_start, span_end)
              values (${job}, ${at(0)}, ${at(5)}), (${job}, ${at(6)}, ${at(9)})`.execute(t.db);
      await migrateTo(t.db, 'latest');
      const expected = { done: 8, failed: 0, missing: 2 };
      assert.deepEqual(await fromHistory(job, t.db), expected);
      assert.deepEqual(await health(job, t.db), expected);
    } finally {
      await t.drop();
    }
  });

  const claim = (job: string, i: number) =>
    stack.t.db
      .transaction()
      .execute((trx) =>
        claimWindow(
          trx,
          { job, start: at(i), end: at(i + 1), generation: 0, key: `${job}/${iso(i)}` },
          { trigger: 'schedule', workflowId: null, at: NOW },
        ),
      );

  test('a span removed by hand (as the claim error says to) is no longer counted done; its windows run again', async () => {
    const job = 'counts-span-removed';
    for (let i = 0; i < 5; i++) await claim(job, i);
    await sql`insert into ${tm.job_watermarks} (job, watermark) values (${job}, ${at(5)})
            on conflict (job) do update set watermark = excluded.watermark`.execute(stack.t.db);
    assert.equal((await compactDoneMarkers(stack.t.db, { cutoff: at(5), job })).windows, 5);
    assert.deepEqual(await health(job, stack.t.db), { done: 5, failed: 0, missing: 5 }, 'folded');
    await sql`delete from ${tm.job_done_spans} where job = ${job}`.execute(stack.t.db);
    const removed = await fromHistory(job, stack.t.db);
    assert.deepEqual(removed, { done: 0, failed: 0, missing: 10 });
    assert.deepEqual(await health(job, stack.t.db), removed, 'the span removed by hand');
    for (let i = 0; i < 5; i++) await claim(job, i);
    const again = await fromHistory(job, stack.t.db);
    assert.deepEqual(again, { done: 5, failed: 0, missing: 5 });
    assert.deepEqual(await health(job, stack.t.db), again, 'its windows run again');
  });

  test('a fold of the counts committing while the recount migration runs is not counted on top of it', async () => {
    const t = await createTestDb({ migrated: false });
    // Housekeeping of that release: its ledger functions, not yet pinned to their schema, find their
    // tables on the connection's search_path, which named the ledger's schema then.
    const a = new pg.Client({ connectionString: t.url, options: `-c search_path=${SCHEMA}` });
    try {
      await migrateTo(t.db, '20261201T2200_housekeeping_indexes');
      const job = 'counts-fold-migrating';
      await a.connect();
      // Written by that release too: the table's triggers call its unpinned functions.
      await a.query(
        `insert into ${SCHEMA}.job_windows (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at)
         select $1, $2::timestamptz + i * interval '1 hour', 0, $2::timestamptz + (i + 1) * interval '1 hour',
                $1 || '/' || i, 'done', 1, 'tick', now()
           from generate_series(0, 5) i`,
        [job, at(0)],
      );
      const pidA = (await a.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      await a.query('begin');
      await a.query(`select ${SCHEMA}.tidemark_fold_window_counts($1)`, [job]); // housekeeping's fold, not committed yet
      const migrating = migrateTo(t.db, 'latest');
      // Wait for the migration to wait on the fold (on its rows or on the table), then let the fold commit.
      const deadline = Date.now() + 60_000;
      for (;;) {
        const w = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
         where datname = current_database() and wait_event_type = 'Lock' and ${pidA} = any(pg_blocking_pids(pid))`.execute(
          t.db,
        );
        if (w.rows[0]!.n > 0) break;
        assert.ok(Date.now() < deadline, 'the migration never waited on the fold');
        await new Promise((r) => setTimeout(r, 50));
      }
      await a.query('commit');
      await migrating;
      const expected = { done: 6, failed: 0, missing: 4 };
      assert.deepEqual(await fromHistory(job, t.db), expected);
      assert.deepEqual(await health(job, t.db), expected);
    } finally {
      await a.end();
      await t.drop();
    }
  });
});
