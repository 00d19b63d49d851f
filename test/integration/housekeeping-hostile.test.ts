// Hostile review of housekeeping's quarantine export (commit 6170029): what a window deletes is
// exactly what its export file holds.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { run as cli } from '../../cli/main.js';
import { exportQuarantine, quarantinePages } from '../../jobs/housekeeping/export.js';
import { HOUSEKEEPING_JOB } from '../../jobs/housekeeping/index.js';
import { removeBatch } from '../../jobs/housekeeping/tables.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { migrateTo } from '../helpers/schema-catalog.js';
import { capturedIo } from '../helpers/cli-io.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => {
  await t?.drop();
});

// Numbers a JSON document may hold that a JavaScript number cannot: more digits than a double
// keeps, a magnitude past its range. The ledger keeps them exactly (jsonb is numeric).
const PAYLOAD = '{"amount": 12345678901234567890.12, "huge": 1e400, "tiny": 1e-400, "id": 9007199254740993}';

test('a quarantine export holds the payload exactly as the ledger did: numbers past a double are not rounded', async () => {
  const { db } = t;
  await sql`insert into quarantine (job, window_start, generation, record_key, reason, payload, created_at)
    values ('exact-q', '2020-01-01T00:00:00Z', 0, 'k1', 'bad', ${PAYLOAD}::jsonb, '2020-01-01T00:00:00Z')`.execute(
    db,
  );
  const { rows } = await sql<{
    payload: string;
  }>`select payload::text as payload from quarantine where job = 'exact-q'`.execute(db);
  const stored = rows[0]!.payload;

  // The CLI's export, before housekeeping removes the row.
  Object.assign(process.env, { DATABASE_URL: t.url, TIDEMARK_CATALOG: 'demo' });
  const { lines: printed, io } = capturedIo();
  assert.equal(await cli(['quarantine', 'export', 'exact-q'], io), 0, printed.join('\n'));

  const exportDir = join(await mkdtemp(join(tmpdir(), 'hk-review-')), 'quarantine');
  const scope = { db, key: `${HOUSEKEEPING_JOB}/2026-11-27T00:00:00Z`, batchSize: 10, exportDir };
  assert.equal(await removeBatch(scope, 'quarantine', new Date('2020-06-01T00:00:00Z')), 1);
  const [file] = await readdir(join(exportDir, 'exact-q'));
  const line = (await readFile(join(exportDir, 'exact-q', file!), 'utf8')).trim();

  // Compared as PostgreSQL reads JSON (numeric), so only a changed value differs.
  for (const [what, text] of [
    ['housekeeping export', line],
    ['quarantine export', printed[0]!],
  ] as const) {
    const { rows: same } = await sql<{
      same: boolean;
    }>`select (${text}::jsonb -> 'payload') = ${stored}::jsonb as same`.execute(db);
    assert.ok(same[0]!.same, `${what} changed the payload: ledger ${stored}, file ${text}`);
  }
});

test('a batch of the largest batch size (100,000 records) is exported in seconds, not minutes: the heartbeat timeout is 2 minutes', async () => {
  const n = 100_000;
  const at = new Date('2020-01-01T00:00:00Z');
  const rows = Array.from({ length: n }, (_, i) => ({
    id: String(i + 1),
    job: 'big-q',
    window_start: at,
    generation: 0,
    record_key: `k${i}`,
    reason: 'bad',
    payload: '{}',
    created_at: at,
  }));
  const dir = await mkdtemp(join(tmpdir(), 'hk-big-'));
  const began = performance.now();
  const [file] = await exportQuarantine(dir, `${HOUSEKEEPING_JOB}/2026-11-27T00:00:00Z`, rows);
  const ms = performance.now() - began;
  const lines = (await readFile(file!, 'utf8')).split('\n').filter(Boolean);
  assert.equal(lines.length, n);
  // The whole time on the event loop (no heartbeat gets out meanwhile): old code 134 s, now < 1 s.
  assert.ok(ms < 20_000, `exporting ${n} records took ${Math.round(ms)} ms`);
});

test('quarantine export --out that cannot be renamed into place (a directory) fails and leaves no temporary file', async () => {
  const { db } = t;
  await db
    .insertInto('quarantine')
    .values({
      job: 'rename-q',
      window_start: '2020-01-01T00:00:00Z',
      generation: 0,
      record_key: 'r1',
      reason: 'bad',
      payload: JSON.stringify({ card: 'business data' }),
    })
    .execute();
  Object.assign(process.env, { DATABASE_URL: t.url, TIDEMARK_CATALOG: 'demo' });
  const { lines: printed, io } = capturedIo();
  const parent = await mkdtemp(join(tmpdir(), 'hk-out-'));
  const out = join(parent, 'export.jsonl');
  await mkdir(out);
  assert.notEqual(await cli(['quarantine', 'export', 'rename-q', '--out', out], io), 0, printed.join('\n'));
  assert.deepEqual(await readdir(parent), ['export.jsonl'], 'no temporary file left beside it');
});

test("quarantine export's pages read one snapshot: a window's records committed while it pages are all in it or all out", async () => {
  const { db } = t;
  const row = (key: string) => ({
    job: 'snap-q',
    window_start: '2020-01-01T00:00:00Z',
    generation: 0,
    record_key: key,
    reason: 'bad',
  });
  await db.insertInto('quarantine').values(row('a1')).execute();
  // One window's transaction quarantines two records, around two committed by another window.
  const window = await db.startTransaction().execute();
  try {
    await window.insertInto('quarantine').values(row('w1')).execute();
    await db
      .insertInto('quarantine')
      .values([row('a2'), row('a3')])
      .execute();
    await window.insertInto('quarantine').values(row('w2')).execute();
    const pages = quarantinePages(db, 'snap-q', new Date(Date.now() + 3_600_000), 2);
    const keys: string[] = [];
    const first = await pages.next();
    assert.ok(!first.done);
    keys.push(...first.value.map((r) => r.record_key));
    await window.commit().execute();
    for await (const page of { [Symbol.asyncIterator]: () => pages })
      keys.push(...page.map((r) => r.record_key));
    const w = keys.filter((k) => k.startsWith('w'));
    assert.ok(w.length === 0 || w.length === 2, `half a window's records exported: ${keys.join(', ')}`);
    assert.deepEqual(
      keys.filter((k) => k.startsWith('a')),
      ['a1', 'a2', 'a3'],
    );
  } finally {
    await window
      .rollback()
      .execute()
      .catch(() => undefined);
  }
});

test("the housekeeping indexes end up valid after an operator's concurrent build of them was interrupted", async () => {
  // The migration's own advice: an operator who cannot have the lock builds the indexes first with
  // `create index concurrently if not exists`. Interrupted (a timeout, ^C), that leaves an INVALID
  // index of the name, which `if not exists` then skips: never used, never rebuilt.
  const u = await createTestDb({ migrated: false });
  const holder = await u.db.startTransaction().setIsolationLevel('repeatable read').execute();
  try {
    await migrateTo(u.db, '20261201T1000_scale_indexes');
    // An older snapshot the concurrent build must wait for; the lock timeout interrupts the wait.
    await sql`select 1 from job_runs limit 1`.execute(holder);
    await assert.rejects(
      u.db.connection().execute(async (c) => {
        await sql`set lock_timeout = '300ms'`.execute(c);
        await sql`create index concurrently if not exists job_runs_finished_idx on job_runs (finished_at)`.execute(
          c,
        );
      }),
      /lock timeout/,
    );
    await holder.rollback().execute();
    await migrateTo(u.db, 'latest');
    const { rows } = await sql<{
      name: string;
      valid: boolean;
    }>`select c.relname as name, i.indisvalid as valid
      from pg_index i join pg_class c on c.oid = i.indexrelid
      where c.relname in ('job_runs_finished_idx', 'effect_attempts_finished_idx', 'incidents_closed_idx',
        'quarantine_created_idx') order by 1`.execute(u.db);
    assert.deepEqual(
      rows,
      [
        'effect_attempts_finished_idx',
        'incidents_closed_idx',
        'job_runs_finished_idx',
        'quarantine_created_idx',
      ].map((name) => ({ name, valid: true })),
    );
  } finally {
    await holder
      .rollback()
      .execute()
      .catch(() => undefined);
    await u.drop();
  }
});

const hasStrace = spawnSync('strace', ['-V']).status === 0;

test(
  'an export into new directories fsyncs each new directory in its parent too, not only the file in its own',
  { skip: hasStrace ? false : 'strace is not installed' },
  async () => {
    // A directory made for the export (the state dir's quarantine/, a job's first <job>/) is an
    // entry of its parent; unless the parent is fsynced, a power loss can take the directory and
    // the file in it, while the delete that followed is committed.
    const root = await mkdtemp(join(tmpdir(), 'hk-fsync-'));
    const state = join(root, 'state');
    const script = join(root, 'write.mts');
    const exportTs = fileURLToPath(new URL('../../jobs/housekeeping/export.ts', import.meta.url));
    await writeFile(
      script,
      `import { ensureWritable, writeDurably } from ${JSON.stringify(exportTs)};
      await ensureWritable(${JSON.stringify(join(state, 'quarantine'))});
      await writeDurably(${JSON.stringify(join(state, 'quarantine', 'new-job', 'f.jsonl'))}, [['{}']]);`,
    );
    const trace = join(root, 'trace');
    const run = spawnSync(
      'strace',
      ['-f', '-qq', '-e', 'trace=openat,fsync', '-o', trace, process.execPath, '--import', 'tsx', script],
      { cwd: fileURLToPath(new URL('../..', import.meta.url)), encoding: 'utf8' },
    );
    assert.equal(run.status, 0, run.stderr);
    // Each path opened, then fsync of that descriptor (a call may be split across
    // lines by another thread: `<unfinished ...>` ... `<... openat resumed>`).
    const lines = (await readFile(trace, 'utf8')).split('\n');
    const pending = new Map<string, string>();
    const opened = new Map<string, string>();
    const synced = new Set<string>();
    for (const l of lines) {
      const pid = l.split(/\s+/)[0]!;
      const open = /openat\(AT_FDCWD, "([^"]+)", [A-Z_|]+(?:, 0\d+)?(?:\) += (\d+)| <unfinished)/.exec(l);
      if (open?.[2]) opened.set(open[2], open[1]!);
      else if (open) pending.set(pid, open[1]!);
      const resumed = /<\.\.\. openat resumed>\) += (\d+)/.exec(l);
      if (resumed && pending.has(pid)) opened.set(resumed[1]!, pending.get(pid)!);
      const sync = /fsync\((\d+)/.exec(l);
      if (sync && opened.has(sync[1]!)) synced.add(opened.get(sync[1]!)!);
    }
    for (const dir of [state, join(state, 'quarantine'), join(state, 'quarantine', 'new-job')])
      assert.ok(synced.has(dir), `${dir} not fsynced; fsynced: ${[...synced].join(', ')}`);
  },
);
