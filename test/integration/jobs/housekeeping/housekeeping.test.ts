// Housekeeping batch by batch on a real database: nothing still needed is removed (a failed effect
// waits for a person, who reads its last attempt; a job's last run is what the overview shows), and
// quarantine exports are readable by their owner only. Then the quarantine export itself: what a
// window deletes is exactly what its export file holds, in bounded time, from one snapshot, durably;
// and the housekeeping indexes after an interrupted build.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, stat, mkdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { run as cli } from '../../../../cli/main.js';
import { removeBatch, type BatchScope, type Kind } from '../../../../jobs/housekeeping/tables.js';
import { effectsInDoubt } from '../../../../operator/effects.js';
import { exportQuarantine, quarantinePages } from '../../../../jobs/housekeeping/export.js';
import { HOUSEKEEPING_JOB } from '../../../../jobs/housekeeping/index.js';
import { createTestDb, tm, type TestDb } from '../../../helpers/db.js';
import { capturedIo } from '../../../helpers/cli-io.js';
import { migrateTo } from '../../../helpers/schema-catalog.js';

const OLD = '2026-01-01T00:00:00Z';
const CUTOFF = new Date('2026-06-01T00:00:00Z');
let t: TestDb;
let exportDir: string;

before(async () => {
  t = await createTestDb();
  exportDir = join(await mkdtemp(join(tmpdir(), 'hk-review-')), 'quarantine');
});
after(async () => t.drop());

async function drain(kind: Kind): Promise<void> {
  const scope: BatchScope = { db: t.db, key: `review/${kind}`, batchSize: 2, exportDir };
  while ((await removeBatch(scope, kind, CUTOFF)) > 0);
}

test("a failed effect (still in the operators' queue, driven again) keeps its attempts and last error", async () => {
  await t.db
    .insertInto('effects')
    .values({
      effect_key: 'r-failed',
      job: 'sales',
      name: 'r-failed',
      channel: 'email',
      policy: 'ask',
      status: 'failed',
      request: '{}',
      provider_key: 'r-failed',
    })
    .execute();
  await t.db
    .insertInto('effect_attempts')
    .values({
      effect_key: 'r-failed',
      fence: 1,
      started_at: OLD,
      finished_at: OLD,
      duration_ms: 1,
      outcome: 'failed',
      error: 'mailbox full',
    })
    .execute();
  await drain('attempts');
  const left = await t.db
    .selectFrom('effect_attempts')
    .select('error')
    .where('effect_key', '=', 'r-failed')
    .execute();
  assert.deepEqual(left, [{ error: 'mailbox full' }]);
  const shown = (await effectsInDoubt(t.db)).find((e) => e.key === 'r-failed');
  assert.equal(shown?.lastAttempt?.error, 'mailbox full');
});

test('quarantine exports are readable by their owner only (payloads are business data)', async () => {
  await t.db
    .insertInto('quarantine')
    .values({
      job: 'sales',
      window_start: OLD,
      generation: 0,
      record_key: 'k1',
      reason: 'amount missing',
      payload: JSON.stringify({ card: '4111 1111 1111 1111' }),
      created_at: OLD,
    })
    .execute();
  const old = process.umask(0o022);
  try {
    await drain('quarantine');
  } finally {
    process.umask(old);
  }
  const files = await readdir(join(exportDir, 'sales'));
  assert.equal(files.length, 1);
  assert.equal((await stat(join(exportDir, 'sales', files[0]!))).mode & 0o777, 0o600);
  assert.equal((await stat(join(exportDir, 'sales'))).mode & 0o777, 0o700);
  assert.equal((await stat(exportDir)).mode & 0o777, 0o700);
});

test("each job's last run of each kind stays (the overview's and `status`'s last run), however old", async () => {
  const run = (job: string, kind: 'tick' | 'window', at: string) => ({
    kind,
    job,
    window_start: kind === 'window' ? at : null,
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    outcome: 'processed',
  });
  await t.db
    .insertInto('job_runs')
    .values([
      run('quarterly', 'window', '2025-10-01T00:00:00Z'),
      run('quarterly', 'window', OLD),
      run('quarterly', 'tick', '2025-12-31T00:00:00Z'),
      run('quarterly', 'tick', OLD),
      run('busy', 'window', OLD),
      run('busy', 'window', '2026-11-30T00:00:00Z'),
    ])
    .execute();
  await drain('runs');
  // The overview's own query: a job's last window run.
  const last = (job: string) =>
    t.db
      .selectFrom('job_runs')
      .select(['started_at'])
      .where('job', '=', job)
      .where('kind', '=', 'window')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  assert.equal((await last('quarterly'))?.started_at.toISOString(), '2026-01-01T00:00:00.000Z');
  const left = await t.db.selectFrom('job_runs').select(['job', 'kind']).orderBy('id').execute();
  assert.deepEqual(left, [
    { job: 'quarterly', kind: 'window' },
    { job: 'quarterly', kind: 'tick' },
    { job: 'busy', kind: 'window' },
  ]);
});

test('a closed incident stays while one of its alerts is still undelivered (the outbox reads it to tell a channel-down report)', async () => {
  const incident = (subject: string) => ({
    job: 'sales',
    subject,
    kind: 'alert-undelivered',
    opened_at: OLD,
    closed_at: OLD,
    last_error: 'smtp down',
  });
  const [pending, sent] = await t.db
    .insertInto('incidents')
    .values([incident('alerts:email:ops@x'), incident('alerts:slack:#ops')])
    .returning('id')
    .execute();
  const alert = (id: string, status: 'failed' | 'done') => ({
    effect_key: `alert:${id}:closed:email:ops@x`,
    job: 'sales',
    name: 'alert',
    channel: 'email',
    policy: 'resend' as const,
    status,
    request: '{}',
    provider_key: `alert:${id}`,
  });
  await t.db
    .insertInto('effects')
    .values([alert(String(pending!.id), 'failed'), alert(String(sent!.id), 'done')])
    .execute();
  await drain('incidents');
  const left = await t.db.selectFrom('incidents').select('subject').execute();
  assert.deepEqual(left, [{ subject: 'alerts:email:ops@x' }]);
});

test('quarantine export of a job nobody knows (a typo) is refused naming it, not an empty export', async () => {
  Object.assign(process.env, { DATABASE_URL: t.url, TIDEMARK_CATALOG: 'demo' });
  const { lines, io } = capturedIo();
  assert.equal(await cli(['quarantine', 'export', 'sales-hourlly'], io), 2, lines.join('\n'));
  assert.match(lines.join('\n'), /sales-hourlly/);
  lines.length = 0;
  // A job the catalog knows, with nothing quarantined: an empty export, no error.
  assert.equal(await cli(['quarantine', 'export', 'sales-hourly'], io), 0, lines.join('\n'));
});

// The quarantine export: what a window deletes is exactly what its export file holds. On a database
// of its own.
describe('the quarantine export (exact, bounded in time, one snapshot, durable) and the housekeeping indexes', () => {
  let t: TestDb;
  before(async () => {
    t = await createTestDb();
  });
  after(async () => {
    await t?.drop();
  });

  // Numbers a JSON document may hold that a JavaScript number cannot: more digits than a double
  // keeps, a magnitude past its range. The ledger keeps them exactly (jsonb is numeric).
  const PAYLOAD =
    '{"amount": 12345678901234567890.12, "huge": 1e400, "tiny": 1e-400, "id": 9007199254740993}';

  test('a quarantine export holds the payload exactly as the ledger did: numbers past a double are not rounded', async () => {
    const { db } = t;
    await sql`insert into ${tm.quarantine} (job, window_start, generation, record_key, reason, payload, created_at)
    values ('exact-q', '2020-01-01T00:00:00Z', 0, 'k1', 'bad', ${PAYLOAD}::jsonb, '2020-01-01T00:00:00Z')`.execute(
      db,
    );
    const { rows } = await sql<{
      payload: string;
    }>`select payload::text as payload from ${tm.quarantine} where job = 'exact-q'`.execute(db);
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
      await sql`select 1 from ${tm.job_runs} limit 1`.execute(holder);
      await assert.rejects(
        u.db.connection().execute(async (c) => {
          await sql`set lock_timeout = '300ms'`.execute(c);
          await sql`create index concurrently if not exists job_runs_finished_idx on ${tm.job_runs} (finished_at)`.execute(
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
      const exportTs = fileURLToPath(new URL('../../../../jobs/housekeeping/export.ts', import.meta.url));
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
        { cwd: fileURLToPath(new URL('../../../..', import.meta.url)), encoding: 'utf8' },
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
});
