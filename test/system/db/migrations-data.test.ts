// Data written by the previous release (test/fixtures/previous-data.sql, recorded by its own code with
// scripts/record-previous-data.ts) survives the migrations since: kept, read by the current code, its
// done windows never applied twice, its jobs continued from their watermarks by the current worker.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { sql, type Kysely } from 'kysely';
import { createDb, migrateAll } from '../../../db/database.js';
import { readWatermark } from '../../../db/ledger.js';
import { shipped } from '../../../db/migrations/index.js';
import { demoMigrations } from '../../../jobs/demo-migrations/index.js';
import { previousRelease } from '../../../db/migrations/releases.js';
import type { Database } from '../../../db/schema.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';
import { jobsOverview, recentWindows } from '../../../operator/overview.js';
import { windowDetail } from '../../../operator/window-detail.js';
import { windowGrid } from '../../../operator/window-grid.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';
import { depsWithChannels, loopbackChannels } from '../../helpers/effects.js';
import {
  BACKUP,
  BROKEN,
  DAY,
  FIXTURE,
  previousCatalog,
  SALES,
  SALES_WATERMARK,
} from '../../helpers/previous-data.js';
import { migrateTo } from '../../helpers/schema-catalog.js';
import { startTemporal, tickAt, uniqueQueue, windowByHand, withWorker } from '../../helpers/temporal.js';

const channels = loopbackChannels();
let env: TestWorkflowEnvironment;
let t: TestDb;
let countsBefore: Record<string, number>;
const backupDir = mkdtempSync(join(tmpdir(), 'tidemark-prev-backup-'));

/** The rows of each table (by name) of `schemas`. */
async function rowCounts(db: Kysely<Database>, schemas: readonly string[]): Promise<Record<string, number>> {
  const tables = await sql<{ schema: string; name: string }>`select n.nspname as schema, c.relname as name
      from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname in (${sql.join(schemas)}) and c.relkind = 'r' and c.relname not like 'kysely_%'
       and c.relname not like 'catalog_migration%'
     order by 2`.execute(db);
  const out: Record<string, number> = {};
  for (const { schema, name } of tables.rows) {
    assert.ok(!(name in out), `${name} is in one of ${schemas.join(', ')} only`);
    out[name] = (
      await sql<{ n: number }>`select count(*)::int as n from ${sql.id(schema, name)}`.execute(db)
    ).rows[0]!.n;
  }
  return out;
}

/** The SQL of docs/upgrading.md that keeps an upgraded installation's demo data. */
function keepDemoSql(): string {
  const page = readFileSync(new URL('../../../docs/upgrading.md', import.meta.url), 'utf8');
  const block = [...page.matchAll(/```sql\n([\s\S]*?)```/g)].find((m) =>
    m[1]!.includes('set schema tidemark_demo'),
  );
  assert.ok(block, "docs/upgrading.md shows how to keep the demo's data");
  return block[1]!;
}

before(async () => {
  [env, t] = await Promise.all([startTemporal(), createTestDb({ migrated: false })]);
  // The previous release as it ran: its migration files as shipped, its ledger and the demo's tables in public.
  const previous = createDb(t.url, { schema: 'public', max: 2 });
  try {
    await migrateTo(previous, previousRelease().last, {}, shipped);
  } finally {
    await previous.destroy();
  }
  execFileSync('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', fileURLToPath(FIXTURE), t.url], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  countsBefore = await rowCounts(t.db, ['public']);
  // The upgrade: the ledger moves into its schema, then the current migrations and the demo's own.
  await migrateAll(t.db, demoMigrations);
  // The demo's data stays in public, the user's to keep or drop: kept here as docs/upgrading.md says.
  execFileSync('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-1', '-c', keepDemoSql(), t.url], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
});
after(async () => {
  await t?.drop();
  rmSync(backupDir, { recursive: true, force: true });
  await env?.teardown();
});

test('the fixture holds what the previous release writes', () => {
  for (const table of [
    'job_windows',
    'job_runs',
    'job_watermarks',
    'quarantine',
    'effects',
    'effect_attempts',
    'incidents',
    'rerun_requests',
    'approval_audit',
    'sales_window_totals',
    'window_notices',
    'backups',
  ])
    assert.ok((countsBefore[table] ?? 0) > 0, `${table} has rows in the fixture`);
});

test('every row is kept by the upgrade: the ledger in its schema, the demo in its own, nothing left in public', async () => {
  const after = await rowCounts(t.db, [SCHEMA, DEMO_SCHEMA]);
  for (const [table, n] of Object.entries(countsBefore)) assert.equal(after[table], n, table);
  assert.deepEqual(await rowCounts(t.db, ['public']), {});
});

test("the previous release's claim call (10 arguments) still works: a new window claimed, a done one refused", async () => {
  const claim = (start: string, end: string) =>
    sql<{
      attempts: number | null;
    }>`select ${tm.fn('tidemark_claim_window')}(${SALES}, ${start}::timestamptz, 0, ${end}::timestamptz,
      ${`${SALES}/${start}`}, 'manual', null::text, now(), '5000', '10000') as attempts`;
  // In a transaction rolled back afterwards: the fixture stays as recorded for the next test.
  await t.db.connection().execute(async (c) => {
    await sql`begin`.execute(c);
    try {
      assert.equal((await claim(`${DAY}T00:00:00Z`, `${DAY}T01:00:00Z`).execute(c)).rows[0]!.attempts, null);
      assert.equal(
        (await claim('2026-03-03T00:00:00Z', '2026-03-03T01:00:00Z').execute(c)).rows[0]!.attempts,
        1,
      );
    } finally {
      await sql`rollback`.execute(c);
    }
  });
});

test('the current code reads the data, refuses its done windows, and continues its jobs from their watermarks', async () => {
  const catalog = previousCatalog(t.url, backupDir);
  const deps = depsWithChannels(t.db, catalog, channels.smtp, channels.chat);
  const taskQueue = uniqueQueue('prev-data');
  const client = env.client;
  const now = new Date(`${DAY}T06:05:00Z`);

  const overview = await jobsOverview(t.db, client, catalog, now);
  assert.deepEqual(
    overview.map((o) => [o.job, o.watermark, o.lastRun?.outcome]),
    [
      [SALES, SALES_WATERMARK, 'processed'],
      [BROKEN, `${DAY}T00:00:00Z`, 'failed'],
      // Run by hand only, never ticked: no watermark yet.
      [BACKUP, null, 'processed'],
    ],
  );
  const recent = await recentWindows(t.db, SALES, 20);
  assert.equal(recent.length, 6);
  assert.ok(recent.every((r) => r.status === 'done'));
  const grid = await windowGrid({
    db: t.db,
    client,
    job: catalog.get(SALES),
    now,
    from: `${DAY}T00:00:00Z`,
    to: `${DAY}T06:00:00Z`,
  });
  assert.equal(grid.windows, 6);
  assert.equal(grid.totals.reruns, 1);
  const brokenGrid = await windowGrid({
    db: t.db,
    client,
    job: catalog.get(BROKEN),
    now,
    from: `${DAY}T00:00:00Z`,
    to: `${DAY}T01:00:00Z`,
  });
  assert.equal(brokenGrid.totals.failed, 1);
  const config = { TIDEMARK_WEB_UI_URL: 'http://ui.test:8233', TEMPORAL_NAMESPACE: 'default' };
  const rerun = await windowDetail({
    db: t.db,
    client,
    config,
    job: catalog.get(SALES),
    key: `${DAY}T01:00:00Z`,
    now,
  });
  assert.deepEqual(
    rerun.ledger.map((l) => [l.generation, l.status]),
    [
      [0, 'done'],
      [1, 'done'],
    ],
  );
  assert.deepEqual(
    rerun.reruns.map((r) => [r.generation, r.status, r.requestedBy, r.decidedBy]),
    [[1, 'done', 'alice', 'bob']],
  );
  const recovered = await windowDetail({
    db: t.db,
    client,
    config,
    job: catalog.get(SALES),
    key: `${DAY}T03:00:00Z`,
    now,
  });
  assert.deepEqual(
    recovered.incidents.map((i) => [i.kind, i.open]),
    [['window-failed', false]],
  );
  const broken = await windowDetail({
    db: t.db,
    client,
    config,
    job: catalog.get(BROKEN),
    key: `${DAY}T00:00:00Z`,
    now,
  });
  assert.equal(broken.state, 'failed');
  assert.deepEqual(
    broken.incidents.map((i) => [i.kind, i.open]),
    [['window-failed', true]],
  );

  const summaryBefore = await t.db.withSchema(DEMO_SCHEMA).selectFrom('daily_sales').selectAll().execute();
  await withWorker(env, taskQueue, deps, async () => {
    // A window the previous release did is refused by the current claim: never applied twice.
    const again = await windowByHand(client, taskQueue, SALES, `${DAY}T02:00:00Z`, `${DAY}T03:00:00Z`);
    assert.equal(again.outcome, 'already-done');
    assert.deepEqual(
      await t.db.withSchema(DEMO_SCHEMA).selectFrom('daily_sales').selectAll().execute(),
      summaryBefore,
    );
    // The next tick continues from the fixture's watermark: 05:00 is processed, with its run record.
    const tick = await tickAt(client, taskQueue, SALES, now.toISOString().replace('.000Z', 'Z'));
    assert.deepEqual(tick.started, [`${SALES}/${SALES_WATERMARK}`]);
    const result = (await client.workflow.getHandle(tick.started[0]!).result()) as { outcome: string };
    assert.equal(result.outcome, 'processed');
  });
  assert.equal((await readWatermark(t.db, SALES))?.toISOString(), `${DAY}T06:00:00.000Z`);
  const run = await t.db
    .selectFrom('job_runs')
    .select(['outcome', 'generation'])
    .where('job', '=', SALES)
    .where('kind', '=', 'window')
    .where('window_start', '=', new Date(SALES_WATERMARK))
    .execute();
  assert.deepEqual(run, [{ outcome: 'processed', generation: 0 }]);
});
