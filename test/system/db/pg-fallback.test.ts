// The second attempt of sslmode=prefer/allow (db/pg-socket.ts, under TidemarkPgClient) measured
// against libpq: how many connections it opens, what happens to the work queued on the client
// meanwhile, and which password pg_dump gets. The shared server (ssl = off) is only read from, through a
// loopback TCP proxy that counts connections; the TLS cases run on a private cluster.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { startPgCluster, type PgCluster } from '../../../chaos/pg-cluster.js';
import { createDb, ensureDatabase } from '../../../db/database.js';
import { pgClient, pgPool } from '../../../db/pg-connection.js';
import { startDump } from '../../../jobs/backup/pg.js';
import { selfSigned } from '../../helpers/certs.js';
import { countingProxy, noTlsServer, type CountingProxy } from '../../helpers/net.js';

const sharedUrl = new URL(process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
const PW_USER = 'fallback_pw_user';
const PW = 'pw-not-in-the-url';
/** A password user over TLS from 127.0.0.1, trusted in plain: what libpq's prefer does after a failed password. */
const TLS_PW_USER = 'fallback_tls_pw_user';

let dir: string;
let wrongCa: string;
/**
 * TLS on; over 127.0.0.1 database postgres by TLS only, template1 by TLS or plain; over ::1 TLS only;
 * a password user (scram); a user with a password over TLS, trusted in plain.
 */
let cluster: PgCluster;
/** Loopback TCP proxies that count the connections they accept: to the shared server, to the cluster. */
let proxy: CountingProxy;
let clusterProxy: CountingProxy;

/** Backends of the shared server with this application_name. */
async function backends(applicationName: string): Promise<number> {
  const c = new pg.Client({ connectionString: sharedUrl.toString() });
  await c.connect();
  try {
    const { rows } = await c.query<{ n: number }>(
      'select count(*)::int as n from pg_stat_activity where application_name = $1',
      [applicationName],
    );
    return rows[0]!.n;
  } finally {
    await c.end();
  }
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Settles with the promise, or fails the test when it has not settled after timeoutMs. */
async function within<T>(what: string, p: Promise<T>, timeoutMs = 60_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([p, limit]);
  } finally {
    clearTimeout(timer);
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tidemark-pgfallback-'));
  // Self-signed, so it is its own root certificate for verify-full (names: localhost, 127.0.0.1, ::1).
  selfSigned(dir, 'server', { subject: '/CN=localhost', san: 'DNS:localhost,IP:127.0.0.1,IP:::1' });
  selfSigned(dir, 'wrong-ca', { subject: '/CN=other CA' });
  wrongCa = join(dir, 'wrong-ca.crt');
  cluster = await startPgCluster({
    listen: ['127.0.0.1', '::1'],
    ssl: {
      cert: readFileSync(join(dir, 'server.crt'), 'utf8'),
      key: readFileSync(join(dir, 'server.key'), 'utf8'),
    },
    hba: [
      'hostnossl postgres all 127.0.0.0/8 reject',
      `hostssl all ${TLS_PW_USER} 127.0.0.0/8 scram-sha-256`,
      `hostnossl all ${TLS_PW_USER} 127.0.0.0/8 trust`,
      `hostnossl all ${PW_USER} 127.0.0.0/8 scram-sha-256`,
      'host all all 127.0.0.0/8 trust',
      // ::1 takes TLS only (as a managed server with forced TLS); the password user with scram.
      'hostnossl all all ::1/128 reject',
      `hostssl all ${PW_USER} ::1/128 scram-sha-256`,
      'hostssl all all ::1/128 trust',
    ],
  });
  const admin = new pg.Client({ host: cluster.dataDir, port: cluster.port, user: 'postgres' });
  await admin.connect();
  await admin.query(`create role ${PW_USER} login password '${PW}'`);
  await admin.query(`create role ${TLS_PW_USER} login password '${PW}'`);
  await admin.end();
  proxy = await countingProxy(sharedUrl.hostname, Number(sharedUrl.port || 5432));
  clusterProxy = await countingProxy('127.0.0.1', cluster.port);
});

after(async () => {
  await proxy?.close();
  await clusterProxy?.close();
  await cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

const viaProxy = (applicationName: string, query = '') =>
  `postgres://postgres@127.0.0.1:${proxy.port}/postgres?application_name=${applicationName}${query}`;

test('prefer on a server without TLS opens one connection, as libpq does: the plain startup goes on the connection that was told "no TLS"', async () => {
  const name = `fallback_one_${process.pid}`;
  const before = proxy.accepted();
  const c = pgClient(viaProxy(name));
  await c.connect();
  try {
    const { rows } = await c.query<{ ssl: boolean }>(
      'select ssl from pg_stat_ssl where pid = pg_backend_pid()',
    );
    assert.equal(rows[0]!.ssl, false);
  } finally {
    await c.end();
  }
  assert.equal(proxy.accepted() - before, 1, 'TCP connections opened for one prefer client');
  // libpq's own count for the same URL (psql, prefer by default).
  const libpqBefore = proxy.accepted();
  await promisify(execFile)('psql', [
    `postgresql://postgres@127.0.0.1:${proxy.port}/postgres?sslmode=prefer`,
    '-Atc',
    'select 1',
  ]);
  assert.equal(proxy.accepted() - libpqBefore, 1, 'TCP connections opened by psql with sslmode=prefer');
});

test('a prefer pool under concurrent load: one connection per client, every one usable, none left after end()', async () => {
  const name = `fallback_pool_${process.pid}`;
  const before = proxy.accepted();
  const pool = pgPool(viaProxy(name), { max: 12 });
  pool.on('error', () => undefined);
  const clients = await within(
    '12 concurrent pool.connect()',
    Promise.all(Array.from({ length: 12 }, () => pool.connect())),
  );
  const pids = await Promise.all(
    clients.map(async (c) => (await c.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid),
  );
  assert.equal(new Set(pids).size, 12);
  assert.equal(pool.totalCount, 12);
  assert.equal(await backends(name), 12);
  for (const c of clients) c.release();
  await within('pool.end()', pool.end());
  assert.equal(proxy.accepted() - before, 12, 'TCP connections opened for 12 prefer clients');
  await waitFor('no backend of the ended pool', async () => (await backends(name)) === 0);
});

test("a query issued before connect() resolves is answered after allow's second (TLS) connection, not dropped", async () => {
  // The private cluster refuses plain connections to postgres: allow's plain attempt fails, TLS follows.
  const c = pgClient(`postgres://postgres@127.0.0.1:${cluster.port}/postgres?sslmode=allow`);
  const connected = c.connect();
  const queued = c.query<{ ssl: boolean }>('select ssl from pg_stat_ssl where pid = pg_backend_pid()');
  try {
    await within('connect()', connected);
    const { rows } = await within('the query issued before connect() resolved', queued);
    assert.equal(rows[0]!.ssl, true);
  } finally {
    await c.end();
  }
});

test("allow's second (TLS) connection keeps what was set on the client before connect(): type parsers, listeners", async () => {
  // The private cluster refuses plain connections to postgres: allow's plain attempt fails, TLS follows.
  const c = pgClient(`postgres://postgres@127.0.0.1:${cluster.port}/postgres?sslmode=allow`);
  c.setTypeParser(pg.types.builtins.INT4, (v) => `int4 ${v}`);
  const notices: string[] = [];
  c.on('notice', (n) => notices.push(n.message ?? ''));
  await within('connect()', c.connect());
  try {
    const { rows } = await c.query<{ n: string; ssl: boolean }>(
      'select 7::int4 as n, ssl from pg_stat_ssl where pid = pg_backend_pid()',
    );
    assert.deepEqual(rows[0], { n: 'int4 7', ssl: true });
    await c.query(`do $$ begin raise notice 'still listening'; end $$`);
    assert.deepEqual(notices, ['still listening']);
  } finally {
    await c.end();
  }
});

/** What psql, then pgClient, make of a URL through clusterProxy: [connections opened, session's ssl or error]. */
async function psqlAndPg(u: string): Promise<[psql: [number, string], ours: [number, string]]> {
  const query = 'select ssl from pg_stat_ssl where pid = pg_backend_pid()';
  const counted = async (run: () => Promise<string>): Promise<[number, string]> => {
    const before = clusterProxy.accepted();
    const answer = await within(u, run());
    return [clusterProxy.accepted() - before, answer];
  };
  const psql = () =>
    promisify(execFile)('psql', [u.replace(/^postgres:/, 'postgresql:'), '-Atc', query]).then(
      ({ stdout }) => stdout.trim(),
      (e: { stderr: string }) => e.stderr,
    );
  const ours = async () => {
    const c = pgClient(u);
    await c.connect();
    try {
      return (await c.query<{ ssl: boolean }>(query)).rows[0]!.ssl ? 't' : 'f';
    } finally {
      await c.end();
    }
  };
  return [
    await counted(psql),
    await counted(() => ours().catch((e: Error & { code?: string }) => `${e.code}: ${e.message}`)),
  ];
}

test('prefer: a refusal after authentication (a missing database) is final, on the one TLS connection, as psql', async () => {
  const [psql, ours] = await psqlAndPg(
    `postgres://postgres@127.0.0.1:${clusterProxy.port}/fallback_missing_${process.pid}?sslmode=prefer`,
  );
  assert.match(psql[1], /database "fallback_missing_\d+" does not exist/);
  assert.match(ours[1], /^3D000: database "fallback_missing_\d+" does not exist/);
  assert.deepEqual([psql[0], ours[0]], [1, 1], 'connections opened by psql, by pgClient');
});

test('prefer: a password refused over TLS is tried again in plain on a new connection, as psql', async () => {
  // Over TLS the user needs a password (this one is wrong); in plain it is trusted.
  const [psql, ours] = await psqlAndPg(
    `postgres://${TLS_PW_USER}:wrong@127.0.0.1:${clusterProxy.port}/template1?sslmode=prefer`,
  );
  assert.deepEqual(psql, [2, 'f']);
  assert.deepEqual(ours, [2, 'f']);
});

test('SCRAM channel binding (enableChannelBinding) over TLS under prefer and allow, as under require', async () => {
  // pg hashes the server certificate of the connection's stream for SCRAM-SHA-256-PLUS: under
  // prefer and allow that stream is db/pg-socket.ts's, which must answer for the TLS connection.
  // ::1 takes TLS only, with scram for this user: allow's TLS is its second attempt.
  for (const mode of ['require', 'prefer', 'allow']) {
    const c = pgClient(`postgres://${PW_USER}:${PW}@[::1]:${cluster.port}/template1?sslmode=${mode}`, {
      enableChannelBinding: true,
    });
    await within(`connect() with sslmode=${mode}`, c.connect());
    try {
      const { rows } = await c.query<{ ssl: boolean }>(
        'select ssl from pg_stat_ssl where pid = pg_backend_pid()',
      );
      assert.equal(rows[0]!.ssl, true, mode);
    } finally {
      await c.end();
    }
  }
});

test('prefer whose TLS fails verification goes on in plain on a new connection (as libpq), queued work included', async () => {
  // template1 takes TLS and plain; the root certificate given does not match the server's.
  const u = `postgres://postgres@127.0.0.1:${cluster.port}/template1?sslmode=prefer&sslrootcert=${wrongCa}`;
  const { stdout } = await promisify(execFile)('psql', [
    `postgresql://postgres@127.0.0.1:${cluster.port}/template1?sslmode=prefer&sslrootcert=${wrongCa}`,
    '-Atc',
    'select ssl from pg_stat_ssl where pid = pg_backend_pid()',
  ]);
  assert.equal(stdout.trim(), 'f', 'libpq: prefer with a failing certificate check is plain');
  const c = pgClient(u);
  const connected = c.connect();
  const queued = c.query<{ ssl: boolean }>('select ssl from pg_stat_ssl where pid = pg_backend_pid()');
  try {
    await within('connect()', connected);
    const { rows } = await within('the query issued before connect() resolved', queued);
    assert.equal(rows[0]!.ssl, false);
  } finally {
    await c.end();
  }
});

test('PGPASSWORD with a URL without password: node-postgres and pg_dump both use it', async () => {
  const u = `postgres://${PW_USER}@127.0.0.1:${cluster.port}/template1?sslmode=disable`;
  const saved = process.env.PGPASSWORD;
  process.env.PGPASSWORD = PW;
  try {
    const db = createDb(u, { max: 1 });
    try {
      const { rows } = await sql<{ user: string }>`select current_user as user`.execute(db);
      assert.equal(rows[0]!.user, PW_USER, 'node-postgres logs in with PGPASSWORD');
    } finally {
      await db.destroy();
    }
    const dump = startDump(u);
    const chunks: Buffer[] = [];
    dump.stream.on('data', (d: Buffer) => chunks.push(d)).on('error', () => undefined);
    await within('pg_dump', dump.done);
    assert.equal(Buffer.concat(chunks).subarray(0, 5).toString(), 'PGDMP');
  } finally {
    if (saved === undefined) delete process.env.PGPASSWORD;
    else process.env.PGPASSWORD = saved;
  }
});

test('options=-c%20... in the URL reaches node-postgres and pg_dump alike (the query is not re-encoded for libpq)', async () => {
  const u = `postgres://postgres@127.0.0.1:${cluster.port}/template1?sslmode=prefer&options=-c%20statement_timeout%3D5min`;
  const c = pgClient(u);
  await c.connect();
  try {
    assert.equal(
      (await c.query<{ t: string }>("select current_setting('statement_timeout') as t")).rows[0]!.t,
      '5min',
    );
  } finally {
    await c.end();
  }
  const dump = startDump(u);
  dump.stream.on('error', () => undefined).resume();
  await within('pg_dump', dump.done);
});

test('a server that says "no TLS": require and verify-* never send a plain startup (node-postgres and psql); prefer does, on the same connection', async () => {
  const fake = await noTlsServer();
  try {
    for (const mode of ['require', 'verify-ca', 'verify-full']) {
      const q = `sslmode=${mode}${mode.startsWith('verify') ? `&sslrootcert=${wrongCa}` : ''}`;
      const c = pgClient(`postgres://postgres@127.0.0.1:${fake.port}/postgres?${q}`);
      await assert.rejects(within(`connect() ${mode}`, c.connect()), /does not offer TLS, but sslmode=/);
      const psql = await promisify(execFile)('psql', [
        `postgresql://postgres@127.0.0.1:${fake.port}/postgres?${q}`,
        '-Atc',
        'select 1',
      ]).then(
        () => 'connected',
        (err: Error) => err.message,
      );
      assert.match(psql, /server does not support SSL, but SSL was required/, `psql ${mode}`);
    }
    assert.equal(fake.startups(), 0, 'no plain startup message reached the server');
    const connections = fake.connections();
    const c = pgClient(`postgres://postgres@127.0.0.1:${fake.port}/postgres?sslmode=prefer`);
    c.on('error', () => undefined);
    await assert.rejects(within('connect() prefer', c.connect()));
    assert.equal(fake.startups(), 1, 'prefer sent its plain startup');
    assert.equal(fake.connections() - connections, 1, 'on the connection that answered "N", as libpq');
  } finally {
    await fake.close();
  }
});

test('verify-full to an IPv6 literal ([::1]) checks the IP against the certificate, for node-postgres and pg_dump alike', async () => {
  const root = join(dir, 'server.crt');
  const u = (query: string) => `postgres://postgres@[::1]:${cluster.port}/template1?${query}`;
  const c = pgClient(u(`sslmode=verify-full&sslrootcert=${root}`));
  await c.connect();
  try {
    const { rows } = await c.query<{ ssl: boolean; family: number }>(
      'select s.ssl, family(inet_client_addr()) as family from pg_stat_ssl s where s.pid = pg_backend_pid()',
    );
    assert.deepEqual(rows[0], { ssl: true, family: 6 });
  } finally {
    await c.end();
  }
  const dump = startDump(u(`sslmode=verify-full&sslrootcert=${root}`));
  dump.stream.on('error', () => undefined).resume();
  await within('pg_dump over IPv6 with verify-full', dump.done);
  // A root certificate that did not sign the server's: refused by both.
  const bad = pgClient(u(`sslmode=verify-full&sslrootcert=${wrongCa}`));
  await assert.rejects(within('connect() with the wrong CA', bad.connect()), /failed verification/);
  const badDump = startDump(u(`sslmode=verify-full&sslrootcert=${wrongCa}`));
  badDump.stream.on('error', () => undefined).resume();
  await assert.rejects(within('pg_dump with the wrong CA', badDump.done), /certificate verify failed/);
});

test('a root certificate removed while a pool has waiters (a rotation): the waiter gets an error naming sslrootcert, the process lives on', async () => {
  const rotating = join(dir, 'rotating-ca.crt');
  copyFileSync(wrongCa, rotating);
  const pool = pgPool(
    viaProxy(`fallback_rotation_${process.pid}`, `&sslmode=prefer&sslrootcert=${rotating}`),
    {
      max: 1,
    },
  );
  pool.on('error', () => undefined);
  try {
    const held = await within('the first client', pool.connect());
    const waiter = pool.connect();
    waiter.catch(() => undefined);
    rmSync(rotating);
    // The held client leaves the pool: the pool makes a new client for the waiter.
    held.release(new Error('retire this client'));
    await assert.rejects(
      within('the waiting pool.connect()', waiter),
      (err: Error & { setting?: string }) => {
        assert.equal(err.setting, 'sslrootcert');
        assert.match(err.message, /sslrootcert names .*rotating-ca\.crt, which cannot be read/);
        return true;
      },
    );
  } finally {
    await pool.end();
  }
});

test("an inherited PGSERVICE whose service says sslmode=disable does not downgrade pg_dump's verify-full", async () => {
  const serviceFile = join(dir, 'pg_service.conf');
  writeFileSync(serviceFile, '[plain]\nsslmode=disable\n');
  const saved = { PGSERVICE: process.env.PGSERVICE, PGSERVICEFILE: process.env.PGSERVICEFILE };
  Object.assign(process.env, { PGSERVICE: 'plain', PGSERVICEFILE: serviceFile });
  try {
    // Database postgres takes TLS only: a plain pg_dump is refused by pg_hba.
    const dump = startDump(
      `postgres://postgres@localhost:${cluster.port}/postgres?sslmode=verify-full&sslrootcert=${join(dir, 'server.crt')}`,
    );
    dump.stream.on('error', () => undefined).resume();
    await within('pg_dump with verify-full', dump.done);
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
});

test('prefer (the default) on a TLS-only server: the TLS attempt\'s answer counts, not the plain retry\'s "no encryption"', async () => {
  // A missing database: ensureDatabase must see 3D000 and create it, as with verify-full.
  const name = `fallback_created_${process.pid}`;
  await within('ensureDatabase', ensureDatabase(`postgres://postgres@[::1]:${cluster.port}/${name}`));
  const c = pgClient(`postgres://postgres@[::1]:${cluster.port}/${name}`);
  await c.connect();
  try {
    assert.equal((await c.query<{ db: string }>('select current_database() as db')).rows[0]!.db, name);
  } finally {
    await c.end();
  }
  // A wrong password: the error says so (libpq's says so too), not "refuses connections without TLS".
  const wrong = pgClient(`postgres://${PW_USER}:not-the-password@[::1]:${cluster.port}/template1`);
  const err = await within(
    'connect() with a wrong password',
    wrong.connect().then(
      () => assert.fail('connected with a wrong password'),
      (e: Error & { code?: string }) => e,
    ),
  );
  assert.equal(err.code, '28P01', err.message);
  const { stderr } = await promisify(execFile)('psql', [
    `postgresql://${PW_USER}:not-the-password@[::1]:${cluster.port}/template1`,
    '-Atc',
    'select 1',
  ]).catch((e: { stderr: string }) => e);
  assert.match(stderr, /password authentication failed/);
});
