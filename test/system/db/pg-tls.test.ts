// PostgreSQL over TLS everywhere tidemark connects: a private cluster (never the shared one) with
// ssl = on, a throwaway CA, server and client certificates made with the openssl CLI, and a
// pg_hba.conf that accepts only `hostssl` - a plain connection is refused - with one user that
// must present a client certificate (`cert`). Over it: migrations and real windows through a
// Temporal worker (the sales summary, the backup job's pg_dump / pg_restore --list / restore check,
// the data-sync source), verify-full with the right and a wrong CA, libpq's sslmode semantics in
// node-postgres, and the PGSSL* variables.
import { demoMigrations } from '../../../jobs/demo-migrations/index.js';
import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, test } from 'node:test';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { sql, type Kysely } from 'kysely';
import { memoryLogger } from '../../../activities/logger.js';
import { startPgCluster, type PgCluster } from '../../../chaos/pg-cluster.js';
import { createDb, DatabaseError, ensureDatabase, migrateAll } from '../../../db/database.js';
import { pgClient } from '../../../db/pg-connection.js';
import type { Database } from '../../../db/schema.js';
import { localDestination } from '../../../jobs/backup/destination.js';
import { databaseBackup } from '../../../jobs/backup/index.js';
import { startDump, pgRestore } from '../../../jobs/backup/pg.js';
import { closeSyncSources, dataSync } from '../../../jobs/data-sync.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowRunResult } from '../../../contract/workflows.js';
import { selfSigned, signCert } from '../../helpers/certs.js';
import { insertOrders, ordersBetween, reference, salesJob, summaryOf } from '../../helpers/jobs.js';
import { startTemporal, uniqueQueue, withWorker } from '../../helpers/temporal.js';

const CERT_USER = 'tls_cert_user';
let dir: string;
let certs: { ca: string; wrongCa: string; clientCert: string; clientKey: string };
let cluster: PgCluster;
/** A second private cluster without TLS (ssl = off, trust): what prefer falls back on, what require refuses. */
let plain: PgCluster;
let env: TestWorkflowEnvironment;

/** A CA, a server certificate for localhost/127.0.0.1 signed by it, a client certificate, and an unrelated CA. */
function makeCerts(): void {
  const ca = selfSigned(dir, 'ca', { subject: '/CN=tidemark test CA' });
  const wrongCa = selfSigned(dir, 'wrong-ca', { subject: '/CN=unrelated CA' });
  signCert(dir, ca, 'server', { subject: '/CN=localhost', san: 'DNS:localhost,IP:127.0.0.1' });
  const client = signCert(dir, ca, 'client', { subject: `/CN=${CERT_USER}` });
  certs = { ca: ca.cert, wrongCa: wrongCa.cert, clientCert: client.cert, clientKey: client.key };
}

const read = (name: string) => readFileSync(join(dir, name), 'utf8');

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tidemark-pgtls-'));
  makeCerts();
  [cluster, env] = await Promise.all([
    startPgCluster({
      listen: ['127.0.0.1', '127.0.0.2'],
      ssl: { cert: read('server.crt'), key: read('server.key'), ca: read('ca.crt') },
      hba: [`hostssl all ${CERT_USER} 127.0.0.0/8 cert`, 'hostssl all all 127.0.0.0/8 trust'],
    }),
    startTemporal(),
  ]);
  plain = await startPgCluster({ listen: ['127.0.0.1'] });
  // The cluster's own admin connection goes over its unix socket (the only non-TLS way in).
  const admin = pgClient(
    `postgres://postgres@localhost/postgres?host=${encodeURIComponent(cluster.dataDir)}&port=${cluster.port}`,
  );
  await admin.connect();
  await admin.query(`create role ${CERT_USER} login superuser`);
  await admin.end();
});
after(async () => {
  await closeSyncSources();
  await env?.teardown();
  await cluster?.destroy();
  await plain?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

/** postgres://<user>@<host>:<port>/<db>?<query> on the TLS cluster. */
const url = (db: string, query: string, opts: { user?: string; host?: string } = {}) =>
  `postgres://${opts.user ?? 'postgres'}@${opts.host ?? 'localhost'}:${cluster.port}/${db}${query ? `?${query}` : ''}`;
const verifyFull = () => `sslmode=verify-full&sslrootcert=${certs.ca}`;
const withClientCert = () => `${verifyFull()}&sslcert=${certs.clientCert}&sslkey=${certs.clientKey}`;

/** Connects with pgClient and returns whether the session is encrypted, and as whom. */
async function session(u: string): Promise<{ ssl: boolean; user: string }> {
  const c = pgClient(u);
  await c.connect();
  try {
    const { rows } = await c.query<{ ssl: boolean; user: string }>(
      'select s.ssl, current_user as user from pg_stat_ssl s where s.pid = pg_backend_pid()',
    );
    return rows[0]!;
  } finally {
    await c.end();
  }
}

async function rejection(p: Promise<unknown>): Promise<Error> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected the connection to be refused');
}

test('a plain connection is refused; the error names sslmode and says how to turn TLS on', async () => {
  const err = await rejection(ensureDatabase(url('postgres', 'sslmode=disable')));
  assert.ok(err instanceof DatabaseError);
  assert.equal(err.code, 'DB_TLS');
  assert.match(err.message, /refuses connections without TLS/);
  assert.match(err.message, /sslmode=disable \(the database URL's sslmode\)/);
  assert.match(err.message, /set sslmode=verify-full&sslrootcert=<CA file>/);
});

test('verify-full with the right CA is encrypted, by host name and by IP; a wrong CA is refused naming sslmode and sslrootcert', async () => {
  assert.deepEqual(await session(url('postgres', verifyFull())), { ssl: true, user: 'postgres' });
  assert.deepEqual(await session(url('postgres', verifyFull(), { host: '127.0.0.1' })), {
    ssl: true,
    user: 'postgres',
  });
  const wrong = `sslmode=verify-full&sslrootcert=${certs.wrongCa}`;
  const err = await rejection(session(url('postgres', wrong)));
  assert.match(
    err.message,
    new RegExp(
      `failed verification under sslmode=verify-full \\(the database URL's sslmode\\) with sslrootcert=${certs.wrongCa}`,
    ),
  );
  // The same through createDb's pool and through ensureDatabase.
  const db = createDb(url('postgres', wrong), { max: 1 });
  try {
    const viaPool = await rejection(sql`select 1`.execute(db));
    assert.match(viaPool.message, /failed verification under sslmode=verify-full/);
  } finally {
    await db.destroy();
  }
  const viaEnsure = await rejection(ensureDatabase(url('postgres', wrong)));
  assert.match(viaEnsure.message, /failed verification under sslmode=verify-full.*wrong-ca\.crt/);
  // verify-ca checks the chain, not the name: a host name the certificate does not list passes
  // verify-ca and fails verify-full.
  const alias = '127.0.0.2';
  assert.equal(
    (await session(url('postgres', `sslmode=verify-ca&sslrootcert=${certs.ca}`, { host: alias }))).ssl,
    true,
  );
  const byName = await rejection(session(url('postgres', verifyFull(), { host: alias })));
  assert.match(byName.message, /sslmode=verify-full.*connect by a host name the certificate lists/);
});

test("libpq's sslmode semantics in node-postgres: require encrypts without verifying, prefer and allow reach TLS", async () => {
  // node-postgres alone reads require as verify-full and would refuse this self-signed chain.
  assert.deepEqual(await session(url('postgres', 'sslmode=require')), { ssl: true, user: 'postgres' });
  // require with a root certificate is verify-ca (libpq): the unrelated CA is refused.
  const err = await rejection(session(url('postgres', `sslmode=require&sslrootcert=${certs.wrongCa}`)));
  assert.match(err.message, /failed verification under sslmode=require/);
  // prefer (the default): TLS first, which this server takes.
  assert.equal((await session(url('postgres', ''))).ssl, true);
  // allow: plain first; refused by pg_hba (hostssl only), so TLS on a second connection.
  assert.equal((await session(url('postgres', 'sslmode=allow'))).ssl, true);
  // disable is disable: no fallback to TLS.
  assert.match((await rejection(session(url('postgres', 'sslmode=disable')))).message, /without TLS/);
});

test('a server without TLS: prefer falls back to plain, require is refused clearly by node-postgres and by pg_dump', async () => {
  assert.deepEqual(await session(plain.url()), { ssl: false, user: 'postgres' });
  assert.equal((await session(`${plain.url()}?sslmode=allow`)).ssl, false);
  // allow's second (TLS) attempt, refused by this server, does not hide the first one's answer:
  // ensureDatabase still sees "database does not exist" and creates it.
  await ensureDatabase(plain.url('made_through_allow') + '?sslmode=allow');
  assert.equal((await session(plain.url('made_through_allow') + '?sslmode=allow')).ssl, false);
  const db = createDb(`${plain.url()}?sslmode=prefer`, { max: 2 });
  try {
    const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_ssl where ssl`.execute(
      db,
    );
    assert.equal(rows[0]!.n, 0);
  } finally {
    await db.destroy();
  }
  const err = await rejection(ensureDatabase(`${plain.url()}?sslmode=require`));
  assert.equal((err as DatabaseError).code, 'DB_TLS');
  assert.match(
    err.message,
    /does not offer TLS, but sslmode=require \(the database URL's sslmode\) requires it/,
  );
  const dump = startDump(`${plain.url()}?sslmode=require`);
  dump.stream.on('error', () => undefined).resume();
  assert.match((await rejection(dump.done)).message, /server does not support SSL, but SSL was required/);
  // prefer for pg_dump too: the dump succeeds in plain.
  const ok = startDump(`${plain.url()}?sslmode=prefer`);
  ok.stream.resume();
  await ok.done;
});

test('a user that must present a client certificate: refused without one (naming sslcert/sslkey), accepted with it', async () => {
  const err = await rejection(session(url('postgres', verifyFull(), { user: CERT_USER })));
  assert.match(err.message, /requires a client certificate .*set sslcert=<certificate>&sslkey=<key>/);
  assert.deepEqual(await session(url('postgres', withClientCert(), { user: CERT_USER })), {
    ssl: true,
    user: CERT_USER,
  });
});

test('PGSSLMODE, PGSSLROOTCERT, PGSSLCERT and PGSSLKEY are honoured by node-postgres and by pg_dump', async () => {
  const saved = { ...process.env };
  Object.assign(process.env, {
    PGSSLMODE: 'verify-full',
    PGSSLROOTCERT: certs.ca,
    PGSSLCERT: certs.clientCert,
    PGSSLKEY: certs.clientKey,
  });
  try {
    const plainUrl = url('postgres', '', { user: CERT_USER });
    const db = createDb(plainUrl, { max: 1 });
    try {
      const { rows } = await sql<{ ssl: boolean; user: string }>`
        select s.ssl, current_user as user from pg_stat_ssl s where s.pid = pg_backend_pid()`.execute(db);
      assert.deepEqual(rows[0], { ssl: true, user: CERT_USER });
    } finally {
      await db.destroy();
    }
    const dump = startDump(plainUrl);
    const chunks: Buffer[] = [];
    await Promise.all([
      pipeline(dump.stream, new Writable({ write: (c: Buffer, _e, cb) => (chunks.push(c), cb()) })),
      dump.done,
    ]);
    assert.ok(Buffer.concat(chunks).subarray(0, 5).toString() === 'PGDMP', 'a custom-format dump');
    // A wrong CA in the environment: refused by libpq as well.
    process.env.PGSSLROOTCERT = certs.wrongCa;
    const bad = startDump(plainUrl);
    bad.stream.on('error', () => undefined).resume();
    const err = await rejection(bad.done);
    assert.match(err.message, /certificate verify failed/);
  } finally {
    for (const k of ['PGSSLMODE', 'PGSSLROOTCERT', 'PGSSLCERT', 'PGSSLKEY']) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }
});

test('over TLS only: migrations, a sales window, a backup (pg_dump, pg_restore --list, restore check) and a data sync from a TLS source, through a Temporal worker', async () => {
  // Ledger as postgres with verify-full; the backed-up and the synced database as the
  // certificate user - every one of these connections is TLS (pg_hba has nothing else).
  const ledgerUrl = url('tidemark_tls', verifyFull());
  await ensureDatabase(ledgerUrl);
  const db: Kysely<Database> = createDb(ledgerUrl, { max: 6 });
  const backupDir = mkdtempSync(join(dir, 'backups-'));
  try {
    assert.ok((await migrateAll(db, demoMigrations)).length > 0);
    const srcUrl = url('tls_source', withClientCert(), { user: CERT_USER });
    await ensureDatabase(srcUrl);
    const src = pgClient(srcUrl);
    await src.connect();
    const W = { start: '2026-10-01T10:00:00.000Z', end: '2026-10-01T11:00:00.000Z' };
    try {
      await src.query('create table items (id serial primary key, label text not null)');
      await src.query("insert into items (label) select 'item ' || n from generate_series(1, 300) n");
      await src.query(`create table customers (id text primary key, name text not null, email text,
        updated_at timestamptz not null, deleted_at timestamptz)`);
      await src.query(
        `insert into customers (id, name, email, updated_at)
         select 'c' || n, 'Customer ' || n, 'c' || n || '@example.test', $1::timestamptz + n * interval '1 minute'
           from generate_series(1, 40) n`,
        [W.start],
      );
    } finally {
      await src.end();
    }
    await sql`create schema crm_copy`.execute(db);
    await sql`create table crm_copy.customers (id text primary key, name text not null, email text, updated_at timestamptz not null)`.execute(
      db,
    );
    const orders = await insertOrders(db, ordersBetween('tls', W.start, W.end, 50));

    const catalog = defineCatalog([
      salesJob('tls-sales'),
      databaseBackup({
        name: 'tls-backup',
        grid: '1h',
        database: srcUrl,
        destination: localDestination(backupDir),
        retention: { daily: 3, weekly: 0, monthly: 0 },
        tables: ['items'],
        restoreCheck: {
          every: 1,
          scratchDatabaseUrl: url('tls_source_scratch', withClientCert(), { user: CERT_USER }),
        },
      }),
      dataSync({
        name: 'tls-sync',
        grid: '1h',
        source: {
          url: srcUrl,
          table: 'public.customers',
          key: 'id',
          columns: ['name', 'email'],
          updatedAt: 'updated_at',
          deletedAt: 'deleted_at',
        },
        targets: [{ table: 'crm_copy.customers' }],
      }),
    ]);
    const taskQueue = uniqueQueue('pg-tls');
    const policy = {
      retry: {
        maximumAttempts: 1,
        initialInterval: '100ms',
        maximumInterval: '100ms',
        backoffCoefficient: 1,
      },
      startToCloseTimeoutMs: 120_000,
    };
    const results = await withWorker(
      env,
      taskQueue,
      { db, catalog, logger: memoryLogger(), now: () => new Date() },
      async () => {
        const out: WindowRunResult[] = [];
        for (const job of ['tls-sales', 'tls-backup', 'tls-sync']) {
          const key = `${job}/${W.start.replace('.000Z', 'Z')}`;
          out.push(
            (await env.client.workflow.execute('window', {
              taskQueue,
              workflowId: key,
              args: [{ job, start: W.start, end: W.end, generation: 0, key, trigger: 'manual', policy }],
            })) as WindowRunResult,
          );
        }
        return out;
      },
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'processed', 'processed'],
    );
    const expected = reference(orders, W.start, W.end);
    assert.deepEqual(await summaryOf(db, 'tls-sales'), {
      count: expected.count,
      totalCents: expected.totalCents,
    });
    const backup = await db
      .selectFrom('backups')
      .selectAll()
      .where('job', '=', 'tls-backup')
      .executeTakeFirstOrThrow();
    assert.equal(backup.restore_checked, true);
    assert.deepEqual(backup.table_counts, { items: 300 });
    assert.deepEqual(readdirSync(join(backupDir, 'tls-backup')), [backup.object_key.split('/')[1]]);
    // The published dump is a whole custom-format archive (the job's own restore check above ran
    // pg_restore into the scratch database over TLS with the client certificate).
    const listing = await pgRestore(createReadStream(join(backupDir, backup.object_key)), ['--list']);
    assert.match(listing, /TABLE DATA public items/);
    const synced = await sql<{ n: number }>`select count(*)::int as n from crm_copy.customers`.execute(db);
    assert.equal(synced.rows[0]!.n, 40);
  } finally {
    await closeSyncSources();
    await db.destroy();
  }
});
