// The built-in housekeeping job end to end, run as a job by a real worker on a real database:
// old settled rows go in bounded batches, recent rows, open incidents and unsettled effects'
// attempts stay, quarantine is exported (exactly the removed rows) before it goes, a failure
// between export and delete loses nothing, and a second window changes nothing.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { memoryLogger } from '../../../../activities/logger.js';
import { run as cli } from '../../../../cli/main.js';
import { HOUSEKEEPING_JOB, housekeeping } from '../../../../jobs/housekeeping/index.js';
import { defineCatalog } from '../../../../schedules/define.js';
import { spawnWorker, workerProcessEnv } from '../../../helpers/processes.js';
import { realStack, uniqueQueue, windowByHand, windowPolicy, withWorker } from '../../../helpers/temporal.js';
import { capturedIo } from '../../../helpers/cli-io.js';
import { tm } from '../../../helpers/db.js';

const stack = realStack();
const OLD = '2026-01-01T00:00:00Z';
const RECENT = '2026-11-26T12:00:00Z';

async function seed(): Promise<void> {
  const db = stack.t.db;
  const run = (finished: string) => ({
    kind: 'tick' as const,
    job: 'sales',
    started_at: finished,
    finished_at: finished,
    duration_ms: 1,
    outcome: 'processed',
  });
  await db
    .insertInto('job_runs')
    .values([...Array.from({ length: 1_200 }, () => run(OLD)), run(RECENT), run(RECENT), run(RECENT)])
    .execute();
  const effect = (key: string, status: 'done' | 'unknown' | 'pending' | 'failed') => ({
    effect_key: key,
    job: 'sales',
    name: key,
    channel: 'email',
    policy: 'ask' as const,
    status,
    request: '{}',
    provider_key: key,
  });
  await db
    .insertInto('effects')
    .values([
      effect('e-done', 'done'),
      effect('e-failed', 'failed'),
      effect('e-unknown', 'unknown'),
      effect('e-pending', 'pending'),
    ])
    .execute();
  const attempt = (key: string, at: string) => ({
    effect_key: key,
    fence: 1,
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    outcome: 'x',
  });
  await db
    .insertInto('effect_attempts')
    .values([
      attempt('e-done', OLD),
      attempt('e-done', OLD),
      attempt('e-done', RECENT),
      attempt('e-failed', OLD),
      attempt('e-unknown', OLD),
      attempt('e-unknown', OLD),
      attempt('e-pending', OLD),
    ])
    .execute();
  const incident = (subject: string, closed: string | null) => ({
    job: 'sales',
    subject,
    kind: 'window',
    opened_at: OLD,
    closed_at: closed,
    last_error: 'boom',
  });
  await db
    .insertInto('incidents')
    .values([
      incident('closed-old', '2026-01-02T00:00:00Z'),
      incident('open-old', null),
      incident('closed-recent', RECENT),
    ])
    .execute();
  const q = (job: string, key: string, at: string) => ({
    job,
    window_start: '2025-12-31T00:00:00Z',
    generation: 0,
    record_key: key,
    reason: 'amount missing',
    payload: JSON.stringify({ key, amount: null }),
    created_at: at,
  });
  await db
    .insertInto('quarantine')
    .values([
      ...Array.from({ length: 7 }, (_, i) => q('sales', `s${i}`, OLD)),
      ...Array.from({ length: 3 }, (_, i) => q('rollup', `r${i}`, OLD)),
      q('sales', 'fresh-1', RECENT),
      q('rollup', 'fresh-2', RECENT),
    ])
    .execute();
}

async function exported(dir: string): Promise<{ files: string[]; rows: Record<string, unknown>[] }> {
  const files: string[] = [];
  const rows: Record<string, unknown>[] = [];
  for (const job of (await readdir(dir)).sort()) {
    for (const f of (await readdir(join(dir, job))).sort()) {
      files.push(`${job}/${f}`);
      const text = await readFile(join(dir, job, f), 'utf8');
      for (const line of text.split('\n').filter(Boolean))
        rows.push(JSON.parse(line) as Record<string, unknown>);
    }
  }
  return { files, rows };
}

test('housekeeping: old settled rows go in bounded batches, quarantine exported first, a failure between export and delete loses nothing, a second run changes nothing', async () => {
  const db = stack.t.db;
  await seed();
  const stateDir = await mkdtemp(join(tmpdir(), 'tidemark-hk-'));
  const quarantineBefore = await db.selectFrom('quarantine').selectAll().orderBy('id').execute();
  let failures = 0;
  const catalog = defineCatalog([
    housekeeping({
      stateDir,
      batchSize: 500,
      retention: { runs: '90d', attempts: '90d', incidents: '180d', quarantine: '90d' },
      // The first export is followed by a failure before its delete commits: the retry must export
      // the same rows to the same file, and then delete them.
      afterExport: async () => {
        if (failures++ === 0) throw new Error('injected: worker lost after export, before delete');
      },
    }),
  ]);
  const logger = memoryLogger();
  const taskQueue = uniqueQueue('hk');
  const day = (start: string, end: string) =>
    windowByHand(stack.env.client, taskQueue, HOUSEKEEPING_JOB, start, end, windowPolicy(3, 60_000));
  await withWorker(stack.env, taskQueue, { db, catalog, logger, now: () => new Date() }, async () => {
    assert.equal((await day('2026-11-27T00:00:00Z', '2026-11-28T00:00:00Z')).outcome, 'processed');
  });
  assert.ok(failures >= 2, 'the export was repeated after the injected failure');

  // Run records: only the recent ones (and the housekeeping window's own records) are left.
  const runs = await db.selectFrom('job_runs').select(['finished_at']).where('job', '=', 'sales').execute();
  assert.equal(runs.length, 3);
  // Attempts: the recent one of a settled effect, and every attempt of failed, unknown and pending effects.
  const attempts = await db
    .selectFrom('effect_attempts')
    .select(['effect_key'])
    .orderBy('effect_key')
    .execute();
  assert.deepEqual(
    attempts.map((a) => a.effect_key),
    ['e-done', 'e-failed', 'e-pending', 'e-unknown', 'e-unknown'],
  );
  const incidents = await db.selectFrom('incidents').select('subject').orderBy('subject').execute();
  assert.deepEqual(
    incidents.map((i) => i.subject),
    ['closed-recent', 'open-old'],
  );
  const left = await db.selectFrom('quarantine').select('record_key').orderBy('record_key').execute();
  assert.deepEqual(
    left.map((r) => r.record_key),
    ['fresh-1', 'fresh-2'],
  );

  // The export holds exactly the removed quarantine rows, once each, whole.
  const dir = join(stateDir, 'quarantine');
  const first = await exported(dir);
  assert.ok(
    first.files.every((f) => f.endsWith('.jsonl')),
    `no temporary file left: ${first.files.join(', ')}`,
  );
  const removed = quarantineBefore.filter((r) => r.created_at.toISOString() === new Date(OLD).toISOString());
  assert.deepEqual(first.rows.map((r) => r.id).sort(), removed.map((r) => String(r.id)).sort());
  const sample = first.rows.find((r) => r.record_key === 's3')!;
  assert.deepEqual(sample.payload, { key: 's3', amount: null });
  assert.equal(sample.job, 'sales');
  assert.equal(sample.reason, 'amount missing');
  assert.equal(sample.window_start, '2025-12-31T00:00:00.000Z');

  // Batches are bounded: every delete transaction removed at most batchSize rows.
  const batches = logger.lines
    .map((l) => /HOUSEKEEPING batch .* table=(\S+) rows=(\d+)/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ table: m[1]!, rows: Number(m[2]) }));
  assert.ok(
    batches.every((b) => b.rows <= 500),
    JSON.stringify(batches),
  );
  assert.deepEqual(
    batches.filter((b) => b.table === 'job_runs').map((b) => b.rows),
    [500, 500, 200],
  );

  // The window's run record reports what each table lost.
  const record = await db
    .selectFrom('job_runs')
    .select('details')
    .where('job', '=', HOUSEKEEPING_JOB)
    .where('kind', '=', 'window')
    .where('outcome', '=', 'processed')
    .executeTakeFirstOrThrow();
  const details = record.details as { removed: Record<string, number>; batches: Record<string, number> };
  assert.deepEqual(details.removed, { job_runs: 1_200, effect_attempts: 2, incidents: 1, quarantine: 10 });
  assert.equal(details.batches.job_runs, 3);

  // The next day's window finds nothing to remove and exports nothing again.
  await withWorker(stack.env, taskQueue, { db, catalog, logger, now: () => new Date() }, async () => {
    assert.equal((await day('2026-11-28T00:00:00Z', '2026-11-29T00:00:00Z')).outcome, 'processed');
  });
  assert.deepEqual(await exported(dir), first);
  const second = await db
    .selectFrom('job_runs')
    .select('details')
    .where('job', '=', HOUSEKEEPING_JOB)
    .where('kind', '=', 'window')
    .where('window_start', '=', new Date('2026-11-28T00:00:00Z'))
    .where('outcome', '=', 'processed')
    .executeTakeFirstOrThrow();
  assert.deepEqual((second.details as { removed: unknown }).removed, {
    job_runs: 0,
    effect_attempts: 0,
    incidents: 0,
    quarantine: 0,
  });
  assert.equal(
    Number(
      (await sql<{ n: string }>`select count(*) as n from ${tm.effect_attempts}`.execute(db)).rows[0]!.n,
    ),
    5,
  );
});

test('housekeeping: a window stops at its time budget and the next window resumes', async () => {
  const db = stack.t.db;
  await db
    .insertInto('job_runs')
    .values(
      Array.from({ length: 25 }, (_, i) => ({
        kind: 'tick' as const,
        job: 'budget',
        started_at: new Date(Date.parse(OLD) + i * 1_000),
        finished_at: new Date(Date.parse(OLD) + i * 1_000),
        duration_ms: 1,
        outcome: 'processed',
      })),
    )
    .execute();
  // A zero budget: each window runs one batch (the check comes after a batch) and stops.
  const catalog = defineCatalog([
    housekeeping({ stateDir: await mkdtemp(join(tmpdir(), 'tidemark-hk-')), batchSize: 10, budget: '0ms' }),
  ]);
  const taskQueue = uniqueQueue('hk-budget');
  const reports: { removed: Record<string, number>; complete: boolean }[] = [];
  await withWorker(
    stack.env,
    taskQueue,
    { db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      for (const d of ['20', '21', '22', '23']) {
        const start = `2026-11-${d}T00:00:00Z`;
        const end = `2026-11-${Number(d) + 1}T00:00:00Z`;
        const result = await windowByHand(stack.env.client, taskQueue, HOUSEKEEPING_JOB, start, end);
        assert.equal(result.outcome, 'processed');
        const record = await db
          .selectFrom('job_runs')
          .select('details')
          .where('job', '=', HOUSEKEEPING_JOB)
          .where('window_start', '=', new Date(start))
          .where('outcome', '=', 'processed')
          .executeTakeFirstOrThrow();
        reports.push(record.details as (typeof reports)[number]);
      }
    },
  );
  assert.deepEqual(
    reports.map((r) => [r.removed.job_runs, r.complete]),
    [
      [10, false],
      [10, false],
      [4, false],
      [0, true],
    ],
  );
  // The job's last tick stays, however old (the overview and `status` show it).
  const left = await db.selectFrom('job_runs').select('id').where('job', '=', 'budget').execute();
  assert.equal(left.length, 1);
});

test("tidemark quarantine export <job> --before T --out FILE writes that job's earlier records, and leaves them", async () => {
  const db = stack.t.db;
  const row = (job: string, key: string, at: string) => ({
    job,
    window_start: '2026-11-01T00:00:00Z',
    generation: 0,
    record_key: key,
    reason: 'bad',
    payload: JSON.stringify({ key }),
    created_at: at,
  });
  await db
    .insertInto('quarantine')
    .values([
      row('cli-q', 'a', '2026-11-02T00:00:00Z'),
      row('cli-q', 'b', '2026-11-03T00:00:00Z'),
      row('cli-q', 'late', '2026-11-10T00:00:00Z'),
      row('other', 'x', '2026-11-02T00:00:00Z'),
    ])
    .execute();
  Object.assign(process.env, { DATABASE_URL: stack.t.url, TIDEMARK_CATALOG: 'demo' });
  const out = join(await mkdtemp(join(tmpdir(), 'tidemark-qx-')), 'export.jsonl');
  const { lines, io } = capturedIo();
  const code = await cli(['quarantine', 'export', 'cli-q', '--before', '2026-11-05', '--out', out], io);
  assert.equal(code, 0, lines.join('\n'));
  const records = (await readFile(out, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { record_key: string; job: string; payload: unknown });
  assert.deepEqual(
    records.map((r) => [r.job, r.record_key, r.payload]),
    [
      ['cli-q', 'a', { key: 'a' }],
      ['cli-q', 'b', { key: 'b' }],
    ],
  );
  const left = await db.selectFrom('quarantine').select('id').where('job', '=', 'cli-q').execute();
  assert.equal(left.length, 3, 'export leaves the records in the ledger');
  assert.equal(await cli(['quarantine', 'export'], io), 2, 'no job named: a usage error');
});

test('a worker killed after a quarantine export, before its delete: the next attempt loses no row and exports none twice', async () => {
  const db = stack.t.db;
  const row = (i: number) => ({
    job: 'crash-q',
    window_start: '2025-12-31T00:00:00Z',
    generation: 0,
    record_key: `c${i}`,
    reason: 'bad',
    payload: JSON.stringify({ i }),
    created_at: OLD,
  });
  await db
    .insertInto('quarantine')
    .values(Array.from({ length: 30 }, (_, i) => row(i)))
    .execute();
  const ids = (await db.selectFrom('quarantine').select('id').where('job', '=', 'crash-q').execute()).map(
    (r) => String(r.id),
  );
  const stateDir = await mkdtemp(join(tmpdir(), 'tidemark-hk-crash-'));
  const taskQueue = uniqueQueue('hk-crash');
  const env = (killAfterExport?: number) =>
    workerProcessEnv(stack, taskQueue, {
      name: HOUSEKEEPING_JOB,
      grid: 'day',
      start: '2026-11-15T00:00:00Z',
      holdMs: 0,
      housekeeping: { stateDir, batchSize: 10, ...(killAfterExport ? { killAfterExport } : {}) },
    });
  const doomed = await spawnWorker('doomed', env(2));
  const run = windowByHand(
    stack.env.client,
    taskQueue,
    HOUSEKEEPING_JOB,
    '2026-11-15T00:00:00Z',
    '2026-11-16T00:00:00Z',
    windowPolicy(3, 5_000),
  );
  await new Promise<void>((r) => doomed.child.once('exit', () => r()));
  assert.equal(doomed.child.signalCode, 'SIGKILL');
  // Killed after the second batch's export: the first batch is gone, the second still in the ledger.
  const between = await db.selectFrom('quarantine').select('id').where('job', '=', 'crash-q').execute();
  assert.equal(between.length, 20);
  const survivor = await spawnWorker('survivor', env());
  try {
    assert.equal((await run).outcome, 'processed');
  } finally {
    await survivor.stop();
  }
  assert.equal(
    (await db.selectFrom('quarantine').select('id').where('job', '=', 'crash-q').execute()).length,
    0,
  );
  const dir = join(stateDir, 'quarantine', 'crash-q');
  const files = (await readdir(dir)).sort();
  assert.equal(files.length, 3, files.join(', '));
  const exportedIds: string[] = [];
  for (const f of files)
    for (const line of (await readFile(join(dir, f), 'utf8')).split('\n').filter(Boolean))
      exportedIds.push((JSON.parse(line) as { id: string }).id);
  const numeric = (a: string, b: string) => Number(a) - Number(b);
  assert.equal(exportedIds.length, 30, 'no row exported twice');
  assert.deepEqual([...exportedIds].sort(numeric), [...ids].sort(numeric), 'every removed row exported');
});

test('housekeeping folds done markers older than their retention into spans; a window in them is still refused', async () => {
  const db = stack.t.db;
  const hour = 3_600_000;
  const day0 = Date.parse('2026-01-01T00:00:00Z');
  const marker = (start: number) => ({
    job: 'markers',
    window_start: new Date(start),
    generation: 0,
    window_end: new Date(start + hour),
    window_key: `markers:${new Date(start).toISOString()}`,
    status: 'done' as const,
    attempts: 1,
    trigger: 'schedule',
    started_at: new Date(start + hour),
  });
  const recent = Date.parse('2026-11-01T00:00:00Z');
  await db
    .insertInto('job_windows')
    .values([...Array.from({ length: 24 }, (_, i) => marker(day0 + i * hour)), marker(recent)])
    .execute();
  await db
    .insertInto('job_watermarks')
    .values({ job: 'markers', watermark: new Date(recent + hour), updated_at: new Date() })
    .execute();
  const catalog = defineCatalog([housekeeping({ stateDir: await mkdtemp(join(tmpdir(), 'tidemark-hk-')) })]);
  const taskQueue = uniqueQueue('hk-markers');
  const start = '2026-11-29T00:00:00Z';
  await withWorker(
    stack.env,
    taskQueue,
    { db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const result = await windowByHand(
        stack.env.client,
        taskQueue,
        HOUSEKEEPING_JOB,
        start,
        '2026-11-30T00:00:00Z',
      );
      assert.equal(result.outcome, 'processed');
    },
  );
  const rows = await db
    .selectFrom('job_windows')
    .select('window_start')
    .where('job', '=', 'markers')
    .execute();
  assert.deepEqual(
    rows.map((r) => r.window_start.toISOString()),
    [new Date(recent).toISOString()],
    'the old markers are folded, the recent one (inside the retention) stays a row',
  );
  const spans = await db.selectFrom('job_done_spans').selectAll().where('job', '=', 'markers').execute();
  assert.deepEqual(
    spans.map((s) => [s.span_start.toISOString(), s.span_end.toISOString()]),
    [['2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z']],
  );
  const record = await db
    .selectFrom('job_runs')
    .select('details')
    .where('job', '=', HOUSEKEEPING_JOB)
    .where('window_start', '=', new Date(start))
    .where('outcome', '=', 'processed')
    .executeTakeFirstOrThrow();
  assert.equal((record.details as { compacted: { windows: number } }).compacted.windows, 24);
  const claim = await sql<{ claimed: number | null }>`select ${tm.fn('tidemark_claim_window')}('markers',
    ${new Date(day0 + 5 * hour)}, 0, ${new Date(day0 + 6 * hour)}, 'markers:again', 'backfill', null, now(),
    null, null) as claimed`.execute(db);
  assert.equal(claim.rows[0]!.claimed, null, 'a folded window is still done: its claim is refused');
});
