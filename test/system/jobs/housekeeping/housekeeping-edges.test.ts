// Housekeeping's edges on a real database and a real worker: export files named by window (two
// windows never overwrite each other's file), the CLI export streamed in pages, an unwritable state
// directory refused before anything is deleted, old rows found through an index, and its own
// progress rows pruned.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { memoryLogger } from '../../../../activities/logger.js';
import { run as cli } from '../../../../cli/main.js';
import { quarantinePages, QUARANTINE_PAGE } from '../../../../jobs/housekeeping/export.js';
import { HOUSEKEEPING_JOB, housekeeping } from '../../../../jobs/housekeeping/index.js';
import {
  findOld,
  KINDS,
  removeBatch,
  TABLE_OF,
  type BatchScope,
} from '../../../../jobs/housekeeping/tables.js';
import { defineCatalog } from '../../../../schedules/define.js';
import { realStack, uniqueQueue, windowByHand, windowPolicy, withWorker } from '../../../helpers/temporal.js';
import { SCHEMA, tm } from '../../../helpers/db.js';

const stack = realStack();
const OLD = '2026-01-01T00:00:00Z';

const qrow = (job: string, key: string, at: string) => ({
  job,
  window_start: '2025-12-31T00:00:00Z',
  generation: 0,
  record_key: key,
  reason: 'bad',
  payload: JSON.stringify({ key }),
  created_at: at,
});

const idsIn = async (file: string): Promise<string[]> =>
  (await readFile(file, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as { id: string }).id);

test('export files are named by window: two windows exporting the same rows keep a file each, a retry rewrites its own', async () => {
  const db = stack.t.db;
  // Older than every other test's rows, and a cutoff that takes only these.
  await db
    .insertInto('quarantine')
    .values(Array.from({ length: 12 }, (_, i) => qrow('edge-q', `e${i}`, '2020-01-01T00:00:00Z')))
    .execute();
  const ids = (
    await db.selectFrom('quarantine').select('id').where('job', '=', 'edge-q').orderBy('id').execute()
  ).map((r) => String(r.id));
  assert.ok(Number(ids[11]) >= 10, 'ids past 9: text order would differ from id order');
  const exportDir = join(await mkdtemp(join(tmpdir(), 'hk-edges-')), 'quarantine');
  const cutoff = new Date('2020-06-01T00:00:00Z');
  const scope = (day: string, fail: boolean): BatchScope => ({
    db,
    key: `${HOUSEKEEPING_JOB}/2026-11-${day}T00:00:00Z`,
    batchSize: 100,
    exportDir,
    afterExport: async () => {
      if (fail) throw new Error('injected: lost after export');
    },
  });
  // Window 27 exports and is lost before its delete; window 28 (another host, or a catch-up
  // window at once) exports the same rows and is lost too; window 27's retry deletes them.
  await assert.rejects(removeBatch(scope('27', true), 'quarantine', cutoff), /injected/);
  await assert.rejects(removeBatch(scope('28', true), 'quarantine', cutoff), /injected/);
  assert.equal(await removeBatch(scope('27', false), 'quarantine', cutoff), 12);
  const files = (await readdir(join(exportDir, 'edge-q'))).sort();
  assert.equal(
    files.length,
    2,
    `one file per window, none overwritten, no temporary left: ${files.join(', ')}`,
  );
  // Each file holds the batch in id order (numeric: 9 before 10), named by its first and last id.
  const range = `${ids[0]!.padStart(20, '0')}-${ids[11]!.padStart(20, '0')}.jsonl`;
  assert.deepEqual(files, [`2026-11-27T000000Z_${range}`, `2026-11-28T000000Z_${range}`]);
  for (const f of files) assert.deepEqual(await idsIn(join(exportDir, 'edge-q', f)), ids);
});

test('quarantine export streams the records in pages of QUARANTINE_PAGE: complete, in id order, to a file and to stdout', async () => {
  const db = stack.t.db;
  const n = 2 * QUARANTINE_PAGE + 500;
  await db
    .insertInto('quarantine')
    .values([
      ...Array.from({ length: n }, (_, i) => qrow('stream-q', `k${String(i).padStart(5, '0')}`, OLD)),
      qrow('stream-q', 'late', '2026-11-20T00:00:00Z'),
      qrow('stream-other', 'x', OLD),
    ])
    .execute();
  const expected = Array.from({ length: n }, (_, i) => `k${String(i).padStart(5, '0')}`);
  // The reader holds one page at a time.
  const pages: number[] = [];
  for await (const page of quarantinePages(db, 'stream-q', new Date('2026-06-01T00:00:00Z')))
    pages.push(page.length);
  assert.equal(QUARANTINE_PAGE, 1_000);
  assert.deepEqual(pages, [1_000, 1_000, 500]);

  Object.assign(process.env, { DATABASE_URL: stack.t.url, TIDEMARK_CATALOG: 'demo' });
  const printed: string[] = [];
  const io = (json = false) => ({
    out: (l: string) => printed.push(l),
    err: (l: string) => printed.push(l),
    json,
    tty: false,
  });
  const keys = (lines: string[]) => lines.map((l) => (JSON.parse(l) as { record_key: string }).record_key);

  const out = join(await mkdtemp(join(tmpdir(), 'hk-stream-')), 'export.jsonl');
  const args = ['quarantine', 'export', 'stream-q', '--before', '2026-06-01'];
  assert.equal(await cli([...args, '--out', out], io()), 0, printed.join('\n'));
  const fileLines = (await readFile(out, 'utf8')).split('\n').filter(Boolean);
  assert.deepEqual(keys(fileLines), expected);
  assert.match(printed.join('\n'), new RegExp(`${n} record\\(s\\) of stream-q`));
  assert.deepEqual(
    (await readdir(join(out, '..'))).filter((f) => f !== 'export.jsonl'),
    [],
    'no temporary file left',
  );

  printed.length = 0;
  assert.equal(await cli(args, io()), 0, printed.join('\n'));
  assert.deepEqual(keys(printed), expected);

  // --json: still one JSON array, printed a record per line as the pages are read.
  printed.length = 0;
  assert.equal(await cli([...args, '--json'], io(true)), 0, printed.join('\n'));
  assert.ok(printed.length >= n, `printed as read, not as one block: ${printed.length} writes`);
  const array = JSON.parse(printed.join('\n')) as { record_key: string; job: string }[];
  assert.deepEqual(
    array.map((r) => r.record_key),
    expected,
  );
  assert.ok(array.every((r) => r.job === 'stream-q'));

  // Nothing quarantined: an empty array, still valid JSON.
  printed.length = 0;
  assert.equal(await cli(['quarantine', 'export', 'sales-hourly', '--json'], io(true)), 0);
  assert.deepEqual(JSON.parse(printed.join('\n')), []);
});

test("quarantine export --before reads a plain date in the job's time zone, as every command's dates are", async () => {
  // sales-hourly of the demo catalog is in Europe/Berlin: 2026-03-01 there began at 2026-02-28T23:00Z.
  await stack.t.db
    .insertInto('quarantine')
    .values([
      qrow('sales-hourly', 'berlin-feb-28', '2026-02-28T22:30:00Z'),
      qrow('sales-hourly', 'berlin-mar-01', '2026-02-28T23:30:00Z'),
    ])
    .execute();
  Object.assign(process.env, { DATABASE_URL: stack.t.url, TIDEMARK_CATALOG: 'demo' });
  const printed: string[] = [];
  const io = {
    out: (l: string) => printed.push(l),
    err: (l: string) => printed.push(l),
    json: false,
    tty: false,
  };
  const code = await cli(['quarantine', 'export', 'sales-hourly', '--before', '2026-03-01'], io);
  assert.equal(code, 0, printed.join('\n'));
  const keys = printed.map((l) => (JSON.parse(l) as { record_key: string }).record_key);
  assert.deepEqual(keys, ['berlin-feb-28']);
});

test('an unwritable state directory fails the window naming TIDEMARK_STATE_DIR and the path, before anything is deleted', async () => {
  const db = stack.t.db;
  const run = (at: string) => ({
    kind: 'tick' as const,
    job: 'unwritable',
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    outcome: 'processed',
  });
  await db
    .insertInto('job_runs')
    .values([run(OLD), run(OLD), run('2026-11-20T00:00:00Z')])
    .execute();
  await db
    .insertInto('quarantine')
    .values(qrow('unwritable', 'u1', OLD))
    .execute();
  // A regular file where the directory should be: refused even to root (permission bits are not).
  const stateDir = join(await mkdtemp(join(tmpdir(), 'hk-unwritable-')), 'state');
  await writeFile(stateDir, 'not a directory');
  const catalog = defineCatalog([housekeeping({ stateDir })]);
  const taskQueue = uniqueQueue('hk-unwritable');
  await withWorker(
    stack.env,
    taskQueue,
    { db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      await assert.rejects(
        windowByHand(
          stack.env.client,
          taskQueue,
          HOUSEKEEPING_JOB,
          '2026-11-27T00:00:00Z',
          '2026-11-28T00:00:00Z',
          windowPolicy(1, 30_000),
        ),
        (err: unknown) => {
          const messages: string[] = [];
          for (let e = err as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
            messages.push(String(e.message));
          const text = messages.join(' | ');
          assert.match(text, /TIDEMARK_STATE_DIR/);
          assert.ok(text.includes(stateDir), text);
          return true;
        },
      );
    },
  );
  const runs = await db.selectFrom('job_runs').select('id').where('job', '=', 'unwritable').execute();
  assert.equal(runs.length, 3, 'no run record deleted');
  const q = await db.selectFrom('quarantine').select('id').where('job', '=', 'unwritable').execute();
  assert.equal(q.length, 1, 'no quarantine row deleted');
});

test('finding old rows of each table is an index range scan, not a scan of the table, when nothing is old', async () => {
  const db = stack.t.db;
  const n = 20_000;
  const recent = '2026-11-20T00:00:00Z';
  await sql`insert into ${tm.job_runs} (kind, job, started_at, finished_at, duration_ms, outcome)
    select 'tick', 'plan-' || (i % 20), ${recent}::timestamptz + i * interval '1 second',
      ${recent}::timestamptz + i * interval '1 second', 1, 'processed' from generate_series(1, ${n}) i`.execute(
    db,
  );
  await sql`insert into ${tm.effects} (effect_key, job, name, channel, policy, status, request, provider_key)
    values ('plan-e', 'plan', 'plan-e', 'email', 'ask', 'done', '{}', 'plan-e')`.execute(db);
  await sql`insert into ${tm.effect_attempts} (effect_key, fence, started_at, finished_at, duration_ms, outcome)
    select 'plan-e', 1, ${recent}::timestamptz + i * interval '1 second',
      ${recent}::timestamptz + i * interval '1 second', 1, 'x' from generate_series(1, ${n}) i`.execute(db);
  await sql`insert into ${tm.incidents} (job, subject, kind, opened_at, closed_at, last_error)
    select 'plan', 'plan-' || i, 'window', ${recent}, case when i % 50 = 0 then null
      else ${recent}::timestamptz + i * interval '1 second' end, 'boom' from generate_series(1, ${n}) i`.execute(
    db,
  );
  await sql`insert into ${tm.quarantine} (job, window_start, generation, record_key, reason, created_at)
    select 'plan', ${recent}, 0, 'plan-' || i, 'bad', ${recent}::timestamptz + i * interval '1 second'
    from generate_series(1, ${n}) i`.execute(db);
  for (const kind of KINDS) await sql`analyze ${sql.id(SCHEMA, TABLE_OF[kind])}`.execute(db);

  // The daily scan: the cutoff is before every row (90 days before today's window).
  const cutoff = new Date('2026-09-01T00:00:00Z');
  const column = {
    runs: 'finished_at',
    attempts: 'finished_at',
    incidents: 'closed_at',
    quarantine: 'created_at',
  };
  interface PlanNode {
    'Node Type': string;
    'Relation Name'?: string;
    Alias?: string;
    'Index Name'?: string;
    'Index Cond'?: string;
    Plans?: PlanNode[];
  }
  const nodes = (p: PlanNode): PlanNode[] => [p, ...(p.Plans ?? []).flatMap(nodes)];
  for (const kind of KINDS) {
    const table = TABLE_OF[kind];
    const { rows } = await sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>`explain (format json) ${findOld(
      kind,
      cutoff,
      5_000,
    )}`.execute(db);
    const all = nodes(rows[0]!['QUERY PLAN'][0].Plan);
    const shown = JSON.stringify(
      all.map((p) => [p['Node Type'], p.Alias, p['Index Name'], p['Index Cond']]),
      null,
      1,
    );
    // The outer table's own scan (a subquery's own alias, `n` or `e`, is its probe per row).
    const own = all.filter((p) => p['Relation Name'] === table && p.Alias === table);
    assert.ok(own.length > 0, `${kind}: ${shown}`);
    assert.ok(!own.some((p) => p['Node Type'] === 'Seq Scan'), `${kind}: a scan of ${table}: ${shown}`);
    const ranged = all.some(
      (p) => p['Index Cond']?.includes(column[kind]) && p['Index Name']?.startsWith(table) === true,
    );
    assert.ok(ranged, `${kind}: no index range on ${table}.${column[kind]}: ${shown}`);
  }
});

test('housekeeping prunes its own progress rows older than the longest retention; recent ones and its own stay', async () => {
  const db = stack.t.db;
  const at = (iso: string) => new Date(iso);
  await db
    .insertInto('housekeeping_progress')
    .values([
      {
        window_key: `${HOUSEKEEPING_JOB}/2025-01-01T00:00:00Z`,
        tbl: 'job_runs',
        batches: 1,
        rows: '5',
        updated_at: at('2025-01-01T03:17:00Z'),
      },
      {
        window_key: `${HOUSEKEEPING_JOB}/2025-01-01T00:00:00Z`,
        tbl: 'quarantine',
        batches: 1,
        rows: '2',
        updated_at: at('2025-01-01T03:18:00Z'),
      },
      {
        window_key: `${HOUSEKEEPING_JOB}/2025-03-01T00:00:00Z`,
        tbl: 'job_runs',
        batches: 2,
        rows: '9',
        updated_at: at('2025-03-01T03:17:00Z'),
      },
      {
        window_key: `${HOUSEKEEPING_JOB}/2026-11-01T00:00:00Z`,
        tbl: 'job_runs',
        batches: 1,
        rows: '3',
        updated_at: at('2026-11-01T03:17:00Z'),
      },
    ])
    .execute();
  // Longest retention 200d: the window ending 2026-11-30 keeps rows from 2026-05-14 on.
  const catalog = defineCatalog([
    housekeeping({
      stateDir: await mkdtemp(join(tmpdir(), 'hk-progress-')),
      retention: { incidents: '200d' },
    }),
  ]);
  const taskQueue = uniqueQueue('hk-progress');
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
  const left = (await db.selectFrom('housekeeping_progress').select('window_key').distinct().execute()).map(
    (r) => r.window_key,
  );
  const key = (day: string) => `${HOUSEKEEPING_JOB}/${day}T00:00:00Z`;
  assert.ok(!left.includes(key('2025-01-01')) && !left.includes(key('2025-03-01')), left.join(', '));
  assert.ok(left.includes(key('2026-11-01')), 'a window inside the longest retention keeps its rows');
  assert.ok(left.includes(key('2026-11-29')), "the window's own report rows stay");
});
