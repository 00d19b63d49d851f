// The database-backup job kind end to end: to a local directory and to a real S3-compatible
// server (moto) with encryption and multipart; restored and compared; retention; and every way
// a backup can go wrong publishing nothing.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import {
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  S3Client,
} from '@aws-sdk/client-s3';
import { sql } from 'kysely';
import pg from 'pg';
import { memoryLogger } from '../../../../activities/logger.js';
import { databaseBackup, keepSet, type BackupOptions } from '../../../../jobs/backup/index.js';
import { localDestination, s3Destination } from '../../../../jobs/backup/destination.js';
import { pgRestore, startDump } from '../../../../jobs/backup/pg.js';
import { lastDrill } from '../../../../jobs/backup/drill.js';
import { decryptor } from '../../../../jobs/backup/streams.js';
import { defineCatalog } from '../../../../schedules/define.js';
import type { WindowRunResult } from '../../../../contract/workflows.js';
import { createTestDb, type TestDb } from '../../../helpers/db.js';
import { startProxy, startS3, type TestS3 } from '../../../helpers/s3.js';
import { realStack, uniqueQueue, withWorker } from '../../../helpers/temporal.js';

const stack = realStack();
let source: TestDb;
let s3: TestS3;
before(async () => {
  [source, s3] = await Promise.all([createTestDb(), startS3()]);
  await sql`create table public.items (id serial primary key, label text not null, payload text not null)`.execute(
    source.db,
  );
  await sql`insert into public.items (label, payload) select 'item ' || n, md5(n::text) || md5((n * 7)::text) from generate_series(1, 2000) n`.execute(
    source.db,
  );
});
after(async () => {
  await source?.drop();
  await s3?.close();
});

const scratchUrl = () => {
  const u = new URL(source.url);
  u.pathname = `/${new URL(source.url).pathname.slice(1)}_scratch`;
  return u.toString();
};
const policy = {
  retry: { maximumAttempts: 1, initialInterval: '100ms', maximumInterval: '100ms', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 120_000,
};
const day = (n: number) => new Date(Date.parse('2026-10-01T00:00:00Z') + n * 86_400_000).toISOString();

async function runDays(
  job: string,
  opts: Omit<BackupOptions, 'name' | 'grid' | 'start'>,
  days: number[],
  start: string | null = day(0),
): Promise<PromiseSettledResult<WindowRunResult>[]> {
  const catalog = defineCatalog([
    databaseBackup({ name: job, grid: 'day', ...(start ? { start } : {}), ...opts }),
  ]);
  const taskQueue = uniqueQueue(job);
  const logger = memoryLogger();
  return await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger, now: () => new Date() },
    async () => {
      const out: PromiseSettledResult<WindowRunResult>[] = [];
      for (const n of days) {
        const key = `${job}/${day(n).replace('.000Z', 'Z')}`;
        out.push(
          ...(await Promise.allSettled([
            stack.env.client.workflow.execute('window', {
              taskQueue,
              workflowId: key,
              args: [{ job, start: day(n), end: day(n + 1), generation: 0, key, trigger: 'manual', policy }],
            }) as Promise<WindowRunResult>,
          ])),
        );
      }
      return out;
    },
  );
}

async function restoredCount(dump: Readable): Promise<number> {
  const url = scratchUrl();
  const admin = new pg.Client({ connectionString: source.url });
  await admin.connect();
  const name = new URL(url).pathname.slice(1);
  await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
  await admin.query(`create database ${pg.escapeIdentifier(name)}`);
  try {
    await pgRestore(dump, ['--no-owner', '--exit-on-error'], url);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const n = Number((await c.query<{ n: string }>('select count(*) as n from public.items')).rows[0]!.n);
    await c.end();
    return n;
  } finally {
    await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
    await admin.end();
  }
}

/** A backup of `items` into a fresh local directory, keeping `daily` days, restore-checking every `every`th. */
async function toLocalDir(daily: number, every: number) {
  const dir = await mkdtemp(join(tmpdir(), 'tidemark-backup-'));
  const opts = {
    database: source.url,
    destination: localDestination(dir),
    retention: { daily, weekly: 0, monthly: 0 },
    tables: ['public.items'],
    restoreCheck: { every, scratchDatabaseUrl: scratchUrl() },
  };
  return { dir, opts };
}

/** A client of the S3 test server that checksums only where the request needs it. */
const s3Client = () =>
  new S3Client({
    region: 'us-east-1',
    endpoint: s3.endpoint,
    forcePathStyle: true,
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });

/** Each window run's outcome, or why it failed. */
const outcomes = (results: PromiseSettledResult<WindowRunResult>[]) =>
  results.map((r) => (r.status === 'fulfilled' ? r.value.outcome : String(r.reason)));

test('to a local directory: three days, restore-checked, retention keeps two, a second run changes nothing', async () => {
  const { dir, opts } = await toLocalDir(2, 1);
  const results = await runDays('bk-local', opts, [0, 1, 2, 2]);
  assert.deepEqual(outcomes(results), ['processed', 'processed', 'processed', 'already-done']);
  const files = (await readdir(join(dir, 'bk-local'))).sort();
  assert.deepEqual(files, ['20261002T000000Z.dump', '20261003T000000Z.dump']);
  const rows = await stack.t.db
    .selectFrom('backups')
    .selectAll()
    .where('job', '=', 'bk-local')
    .orderBy('window_start')
    .execute();
  assert.deepEqual(
    rows.map((r) => [r.object_key, r.deleted_at !== null, r.restore_checked]),
    [
      ['bk-local/20261001T000000Z.dump', true, true],
      ['bk-local/20261002T000000Z.dump', false, true],
      ['bk-local/20261003T000000Z.dump', false, true],
    ],
  );
  const latest = rows[2]!;
  const bytes = await readFile(join(dir, latest.object_key));
  assert.equal(bytes.length, Number(latest.bytes));
  assert.equal((await import('node:crypto')).createHash('sha256').update(bytes).digest('hex'), latest.sha256);
  assert.deepEqual(latest.table_counts, { 'public.items': 2000 });
  assert.equal(await restoredCount(Readable.from(bytes)), 2000);
  assert.deepEqual(await readdir(join(dir, '.staging', 'bk-local')), [], 'no staging left');
});

test('a failed restore drill fails its window: nothing published; the last drill (what `tidemark jobs` shows) is the failure, from the run record', async () => {
  const { dir, opts } = await toLocalDir(7, 1);
  // A scratch server nobody listens on: the drill cannot restore.
  const results = await runDays(
    'drill-fails',
    { ...opts, restoreCheck: { every: 1, scratchDatabaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere' } },
    [0],
  );
  assert.equal(results[0]?.status, 'rejected');
  assert.deepEqual(await readdir(join(dir, 'drill-fails')).catch(() => []), [], 'nothing published');
  const drill = await lastDrill(stack.t.db, 'drill-fails');
  assert.equal(drill?.ok, false);
  assert.equal(drill?.windowKey, 'drill-fails/2026-10-01T00:00:00Z');
  assert.match(drill!.detail, /ECONNREFUSED|connect/);
  // The next window's drill passes, and is the last one now.
  const next = await runDays('drill-fails', opts, [1]);
  assert.deepEqual(outcomes(next), ['processed']);
  assert.deepEqual(
    await lastDrill(stack.t.db, 'drill-fails').then((d) => [d?.ok, d?.trigger, d?.windowKey]),
    [true, 'schedule', 'drill-fails/2026-10-02T00:00:00Z'],
  );
});

test('a job without start restore-checks every Nth window, counted on the grid from the epoch', async () => {
  const { opts } = await toLocalDir(7, 2);
  const results = await runDays('cadence-nostart', opts, [0, 1, 2, 3], null);
  assert.deepEqual(outcomes(results), ['processed', 'processed', 'processed', 'processed']);
  const rows = await stack.t.db
    .selectFrom('backups')
    .select(['window_start', 'restore_checked'])
    .where('job', '=', 'cadence-nostart')
    .orderBy('window_start')
    .execute();
  // 2026-10-01 is day 20727 since 1970-01-01 (odd), so with every 2 the 2nd and 4th windows are checked.
  assert.deepEqual(
    rows.map((r) => [r.window_start.toISOString(), r.restore_checked]),
    [
      [day(0), false],
      [day(1), true],
      [day(2), false],
      [day(3), true],
    ],
  );
});

test('to S3-compatible storage, encrypted, multipart: verified and restorable', async () => {
  await s3.createBucket('backups');
  // Enough incompressible rows for a dump of several 5 MiB parts.
  await sql`create table public.blobs (id serial primary key, data text not null)`.execute(source.db);
  await sql`insert into public.blobs (data) select string_agg(md5(random()::text), '') from generate_series(1, 400000) n group by n % 400`.execute(
    source.db,
  );
  const key = randomBytes(32);
  // The keys come from the environment (never from code): "<id>:<base64>", the first encrypts.
  process.env.TIDEMARK_TEST_BK_S3_KEYS = `k1:${key.toString('base64')}`;
  const settings = {
    bucket: 'backups',
    endpoint: s3.endpoint,
    accessKeyId: 'test',
    secretAccessKey: 'test',
    partSize: 5 * 1024 * 1024,
  };
  const results = await runDays(
    'bk-s3',
    {
      database: source.url,
      destination: s3Destination(settings),
      encryption: { env: 'TIDEMARK_TEST_BK_S3_KEYS' },
      retention: { daily: 7, weekly: 4, monthly: 12 },
      tables: ['public.items', 'public.blobs'],
    },
    [0],
  );
  assert.equal(results[0]?.status, 'fulfilled', String((results[0] as PromiseRejectedResult).reason));
  const row = await stack.t.db
    .selectFrom('backups')
    .selectAll()
    .where('job', '=', 'bk-s3')
    .executeTakeFirstOrThrow();
  assert.ok(Number(row.bytes) > 5 * 1024 * 1024, `${row.bytes} bytes: more than one part`);
  assert.equal(row.encrypted, true);
  assert.equal(row.key_id, 'k1');
  const client = s3Client();
  const listed = await client.send(new ListObjectsV2Command({ Bucket: 'backups' }));
  assert.deepEqual(
    listed.Contents?.map((c) => [c.Key, c.Size]),
    [['bk-s3/20261001T000000Z.dump.enc', Number(row.bytes)]],
  );
  const body = (await client.send(new GetObjectCommand({ Bucket: 'backups', Key: row.object_key })))
    .Body as Readable;
  const raw = Buffer.concat(await body.toArray());
  assert.equal((await import('node:crypto')).createHash('sha256').update(raw).digest('hex'), row.sha256);
  assert.equal(raw.subarray(0, 4).toString('latin1'), 'TMBK', 'the header names the format');
  assert.equal(raw.subarray(6, 6 + raw[5]!).toString('utf8'), 'k1', 'and the key id');
  assert.ok(!raw.includes(Buffer.from('PGDMP')), 'encrypted at rest');
  assert.equal(await restoredCount(Readable.from(raw).pipe(decryptor(() => key))), 2000);
});

test('S3 publish above the copy threshold is a multipart copy (UploadPartCopy), byte-exact', async () => {
  await s3.createBucket('large');
  // CopyObject stops at 5 GB: a small threshold and part size take the multipart path here.
  const dest = s3Destination({
    bucket: 'large',
    endpoint: s3.endpoint,
    accessKeyId: 'test',
    secretAccessKey: 'test',
    partSize: 5 * 1024 * 1024,
    copyThreshold: 5 * 1024 * 1024,
    copyPartSize: 5 * 1024 * 1024,
  });
  const data = randomBytes(12 * 1024 * 1024 + 123);
  const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
  await dest.putStaging('big/object.bin', Readable.from([data]));
  await dest.publish('big/object.bin');
  const client = s3Client();
  const got = await client.send(new GetObjectCommand({ Bucket: 'large', Key: 'big/object.bin' }));
  const raw = Buffer.concat(await (got.Body as Readable).toArray());
  assert.equal(raw.length, data.length);
  assert.equal(sha(raw), sha(data), 'published object is byte-exact');
  // A multipart object's ETag ends in -<parts>: 12 MiB in 5 MiB parts is three.
  assert.match(got.ETag ?? '', /-3"?$/, `ETag ${got.ETag} of a three-part copy`);
  const listed = await client.send(new ListObjectsV2Command({ Bucket: 'large' }));
  assert.deepEqual(
    listed.Contents?.map((c) => c.Key),
    ['big/object.bin'],
    'staging removed',
  );
  const uploads = await client.send(new ListMultipartUploadsCommand({ Bucket: 'large' }));
  assert.deepEqual(uploads.Uploads ?? [], [], 'no multipart upload left open');
});

test('a failed pg_dump, a killed pg_dump, a cut-off upload and a checksum mismatch publish nothing', async () => {
  await s3.createBucket('broken');
  const proxy = await startProxy(s3.endpoint);
  const dest = s3Destination({
    bucket: 'broken',
    endpoint: proxy.url,
    accessKeyId: 'test',
    secretAccessKey: 'test',
  });
  const base = {
    destination: dest,
    retention: { daily: 7, weekly: 0, monthly: 0 },
    tables: ['public.items'],
  };
  const missing = new URL(source.url);
  missing.pathname = '/no_such_database_here';
  const cases: [string, Omit<BackupOptions, 'name' | 'grid' | 'start'>, () => void, RegExp][] = [
    ['bk-failed', { ...base, database: missing.toString() }, () => undefined, /does not exist/],
    [
      'bk-killed',
      { ...base, database: source.url, onDump: (d) => d.stream.once('data', () => d.child.kill('SIGKILL')) },
      () => undefined,
      /pg_dump was killed \(SIGKILL\)/,
    ],
    [
      'bk-cut',
      { ...base, database: source.url },
      () => {
        proxy.mode = { kind: 'cut-after', bytes: 20_000 };
      },
      /socket|ECONNRESET|closed|hang up|aborted/i,
    ],
    [
      'bk-flip',
      { ...base, database: source.url },
      () => {
        proxy.mode = { kind: 'flip-byte', at: 5_000 };
      },
      /checksum mismatch/,
    ],
  ];
  try {
    for (const [job, opts, arm, reason] of cases) {
      arm();
      const [r] = await runDays(job, opts, [0]);
      proxy.mode = { kind: 'pass' };
      assert.equal(r?.status, 'rejected', job);
      const runs = await stack.t.db
        .selectFrom('job_runs')
        .select('reason')
        .where('job', '=', job)
        .where('outcome', '=', 'failed')
        .execute();
      assert.match(runs[0]?.reason ?? '', reason, job);
      const incident = await stack.t.db
        .selectFrom('incidents')
        .select('kind')
        .where('job', '=', job)
        .executeTakeFirst();
      assert.equal(incident?.kind, 'window-failed', `${job} alerted`);
    }
    const client = new S3Client({
      region: 'us-east-1',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: 'broken' }));
    assert.deepEqual(listed.Contents ?? [], [], 'nothing published, no staging left');
    assert.equal(
      (
        await stack.t.db
          .selectFrom('backups')
          .selectAll()
          .where('job', 'like', 'bk-%')
          .where('job', '<>', 'bk-local')
          .where('job', '<>', 'bk-s3')
          .execute()
      ).length,
      0,
    );
  } finally {
    await proxy.close();
  }
});

test('pg_restore --list whose input is still open after the table of contents returns the listing', async () => {
  const dump = startDump(source.url);
  const chunks: Buffer[] = [];
  for await (const c of dump.stream) chunks.push(c as Buffer);
  await dump.done;
  // The whole archive, and then an input that has not ended (a destination or a decryptor still
  // delivering, as on a busy host): pg_restore --list exits 0 after the table of contents, and
  // node destroys the child's stdin on exit - a premature close, not a failed listing.
  const input = new Readable({ read: () => undefined });
  input.push(Buffer.concat(chunks));
  const listing = await pgRestore(input, ['--list']);
  assert.match(listing, /TABLE DATA public items/);
  assert.ok(input.destroyed, 'the input is no longer read');
});

test("pg_restore refusing its input says pg_restore's own reason, not the broken pipe it left behind", async () => {
  // Not an archive, and more of it than a pipe holds: pg_restore exits 1 after its first read and
  // the writes that follow hit the closed pipe (EPIPE).
  const input = Readable.from(
    (function* () {
      for (let i = 0; i < 64; i++) yield Buffer.alloc(64 * 1024, 'x');
    })(),
  );
  await assert.rejects(pgRestore(input, ['--list']), (err: Error) => {
    assert.match(
      err.message,
      /pg_restore --list exited with 1: .*(not appear to be a valid archive|input file)/s,
    );
    return true;
  });
});

test('retention keeps the newest N daily, weekly and monthly backups', () => {
  const starts = Array.from({ length: 90 }, (_, i) => ({
    key: `k${i}`,
    start: new Date(Date.parse('2026-01-01T00:00:00Z') + i * 86_400_000),
  }));
  const keep = keepSet(starts, { daily: 3, weekly: 2, monthly: 2 }, 'UTC');
  // Daily: Mar 29-31; weekly: the newest of the two newest ISO weeks (Mar 31, Mar 29); monthly: Mar 31, Feb 28.
  assert.deepEqual([...keep].sort(), ['k58', 'k87', 'k88', 'k89'].sort());
});
