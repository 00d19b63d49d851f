// The maintenance job kind end to end: Redis keys by pattern and idle age, log rotation with
// compression and retention, old temporary files (links never followed), expired sessions;
// each run twice, checked against what the test itself put there.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { memoryLogger } from '../../../../activities/logger.js';
import { maintenance } from '../../../../jobs/maintenance/index.js';
import { defineCatalog } from '../../../../schedules/define.js';
import type { WindowRunResult } from '../../../../contract/workflows.js';
import { realStack, uniqueQueue, withWorker } from '../../../helpers/temporal.js';

const stack = realStack();
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

test('maintenance: caches, logs, temporary files and sessions cleaned, and a second run changes nothing', async () => {
  const job = 'maintenance';
  const prefix = `tidemark-test:${randomBytes(4).toString('hex')}`;
  const redis = new Redis(REDIS_URL);
  const root = await mkdtemp(join(tmpdir(), 'tidemark-maint-'));
  const [logs, temp, outside] = [join(root, 'logs'), join(root, 'tmp'), join(root, 'outside')];
  try {
    // Redis: five cache keys and one of another pattern. Three have sat idle for two hours
    // (RESTORE ... IDLETIME sets a key's idle clock), two were written just now: an hour's limit
    // tells them apart however slowly the machine runs the test.
    await redis.set(`${prefix}:value`, 'v');
    const value = (await redis.dumpBuffer(`${prefix}:value`))!;
    await redis.del(`${prefix}:value`);
    for (let i = 0; i < 3; i++) await redis.restore(`${prefix}:cache:${i}`, 0, value, 'IDLETIME', 7_200);
    for (const i of [3, 4]) await redis.set(`${prefix}:cache:${i}`, 'v');
    await redis.set(`${prefix}:keep:0`, 'v');
    // Logs: the live file and three older archives; keep 2.
    await mkdir(logs);
    await writeFile(join(logs, 'app.log'), 'line 1\nline 2\n');
    for (const d of ['20260101', '20260201', '20260301'])
      await writeFile(join(logs, `app.log.${d}T000000Z.gz`), gzipSync(`old ${d}`));
    // Temp: old and new files, an old file in a subdirectory, and links to an old file outside.
    await mkdir(join(temp, 'sub'), { recursive: true });
    await mkdir(outside);
    const old = new Date('2020-01-01T00:00:00Z');
    for (const f of ['old-1.tmp', 'old-2.tmp', 'sub/old-3.tmp']) {
      await writeFile(join(temp, f), 'x');
      await utimes(join(temp, f), old, old);
    }
    await writeFile(join(temp, 'fresh.tmp'), 'x');
    await writeFile(join(outside, 'precious.dat'), 'keep me');
    await utimes(join(outside, 'precious.dat'), old, old);
    await symlink(outside, join(temp, 'link-to-dir'));
    await symlink(join(outside, 'precious.dat'), join(temp, 'link-to-file'));
    // Sessions: two expired before the window's end, one valid after it.
    await sql`create table public.sessions (id text primary key, expires_at timestamptz not null)`.execute(
      stack.t.db,
    );
    await sql`insert into public.sessions values ('s1', '2026-11-01T00:00:00Z'), ('s2', '2026-11-20T00:00:00Z'), ('s3', '2099-01-01T00:00:00Z')`.execute(
      stack.t.db,
    );

    const catalog = defineCatalog([
      maintenance({
        name: job,
        grid: 'day',
        start: '2026-11-27T00:00:00Z',
        redis: [{ url: REDIS_URL, pattern: `${prefix}:cache:*`, maxIdleSeconds: 3_600 }],
        logs: [{ dir: logs, file: 'app.log', keep: 2 }],
        temp: [{ dir: temp, maxAgeMs: 86_400_000 }],
        sessions: [{ table: 'public.sessions', expiresColumn: 'expires_at' }],
      }),
    ]);
    const taskQueue = uniqueQueue(job);
    const key = `${job}/2026-11-27T00:00:00Z`;
    const run = () =>
      stack.env.client.workflow.execute('window', {
        taskQueue,
        workflowId: key,
        args: [
          {
            job,
            start: '2026-11-27T00:00:00Z',
            end: '2026-11-28T00:00:00Z',
            generation: 0,
            key,
            trigger: 'manual',
            policy: {
              retry: {
                maximumAttempts: 2,
                initialInterval: '100ms',
                maximumInterval: '100ms',
                backoffCoefficient: 1,
              },
              startToCloseTimeoutMs: 30_000,
            },
          },
        ],
      }) as Promise<WindowRunResult>;
    await withWorker(
      stack.env,
      taskQueue,
      { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
      async () => {
        assert.equal((await run()).outcome, 'processed');
        assert.equal((await run()).outcome, 'already-done');
      },
    );

    assert.deepEqual((await redis.keys(`${prefix}:*`)).sort(), [
      `${prefix}:cache:3`,
      `${prefix}:cache:4`,
      `${prefix}:keep:0`,
    ]);
    assert.deepEqual((await readdir(logs)).sort(), [
      'app.log',
      'app.log.20260301T000000Z.gz',
      'app.log.20261127T000000Z.gz',
    ]);
    assert.equal(await readFile(join(logs, 'app.log'), 'utf8'), '');
    assert.equal(
      gunzipSync(await readFile(join(logs, 'app.log.20261127T000000Z.gz'))).toString(),
      'line 1\nline 2\n',
    );
    assert.deepEqual((await readdir(temp)).sort(), ['fresh.tmp', 'link-to-dir', 'link-to-file', 'sub']);
    assert.deepEqual(await readdir(join(temp, 'sub')), []);
    assert.equal(
      await readFile(join(outside, 'precious.dat'), 'utf8'),
      'keep me',
      'nothing outside the directory was touched',
    );
    const left = await sql<{ id: string }>`select id from public.sessions order by id`.execute(stack.t.db);
    assert.deepEqual(
      left.rows.map((r) => r.id),
      ['s3'],
    );

    // What it removed is on the run record.
    const record = await stack.t.db
      .selectFrom('job_runs')
      .select('details')
      .where('job', '=', job)
      .where('outcome', '=', 'processed')
      .executeTakeFirstOrThrow();
    const report = record.details as { removed: number; report: Record<string, { removed: unknown }> };
    assert.equal(report.removed, 2 + 3 + 2 + 3);
    assert.deepEqual((report.report[`temp:${temp}`] as unknown as { files: string[] }).files, [
      'old-1.tmp',
      'old-2.tmp',
      'sub/old-3.tmp',
    ]);
  } finally {
    const leftovers = await redis.keys(`${prefix}:*`);
    if (leftovers.length) await redis.del(...leftovers);
    redis.disconnect();
  }
});
