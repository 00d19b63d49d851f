// Review of the flat counts (migration 20261201T2000) and the span lock horizon (20261201T2100):
// the counts against the history (the overview's old full query) where the review found them apart.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../../db/schema.js';
import { compactDoneMarkers } from '../../db/compaction.js';
import { claimWindow } from '../../db/ledger.js';
import { jobHealth } from '../../operator/job-health.js';
import { defineCatalog } from '../../schedules/define.js';
import { createTestDb } from '../helpers/db.js';
import { salesJob } from '../helpers/jobs.js';
import { migrateTo } from '../helpers/schema-catalog.js';
import { realStack } from '../helpers/temporal.js';
import { countsFromHistory } from '../helpers/window-counts.js';

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
    await sql`insert into job_done_spans (job, span_start, span_end)
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
  await sql`insert into job_watermarks (job, watermark) values (${job}, ${at(5)})
            on conflict (job) do update set watermark = excluded.watermark`.execute(stack.t.db);
  assert.equal((await compactDoneMarkers(stack.t.db, { cutoff: at(5), job })).windows, 5);
  assert.deepEqual(await health(job, stack.t.db), { done: 5, failed: 0, missing: 5 }, 'folded');
  await sql`delete from job_done_spans where job = ${job}`.execute(stack.t.db);
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
  const a = new pg.Client({ connectionString: t.url });
  try {
    await migrateTo(t.db, '20261201T2200_housekeeping_indexes');
    const job = 'counts-fold-migrating';
    await sql`
      insert into job_windows (job, window_start, generation, window_end, window_key, status, attempts, trigger, started_at)
      select ${job}, ${at(0)}::timestamptz + i * interval '1 hour', 0, ${at(0)}::timestamptz + (i + 1) * interval '1 hour',
             ${job} || '/' || i, 'done', 1, 'tick', now()
        from generate_series(0, 5) i`.execute(t.db);
    await a.connect();
    const pidA = (await a.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    await a.query('begin');
    await a.query('select tidemark_fold_window_counts($1)', [job]); // housekeeping's fold, not committed yet
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
