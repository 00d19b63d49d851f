// libpq's second attempt of sslmode=allow/prefer under one node-postgres client (db/pg-socket.ts)
// against a scripted server speaking the start of the PostgreSQL protocol on loopback: which
// connections a client opens, with or without TLS, what each receives, and what the caller is told.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { TLSSocket } from 'node:tls';
import { to as copyTo } from 'pg-copy-streams';
import { copyRows } from '../../db/copy.js';
import { pgClient } from '../../db/pg-connection.js';
import { SslModeSocket } from '../../db/pg-socket.js';
import { selfSigned } from '../helpers/certs.js';

const SSL_REQUEST_CODE = 80877103;

/** What the server does with one connection. */
interface Step {
  /** The answer to an SSLRequest (default "N"); 'S-then-close' closes before the TLS handshake. */
  ssl?: 'S' | 'N' | 'S-then-close';
  /** Ask for an MD5 password after the startup (a new salt each connection). */
  md5?: boolean;
  /** accept: AuthenticationOk, ReadyForQuery; or an ErrorResponse (after AuthenticationOk when `authenticated`). */
  startup: 'accept' | { code: string; message: string; authenticated?: boolean; split?: boolean };
}

/** One connection as the server saw it. */
interface Seen {
  tls: boolean;
  startup?: Buffer;
  /** The password messages the client sent. */
  passwords: string[];
  /** The lines of COPY data the client sent. */
  copied: number;
}

let dir: string;
let key: Buffer;
let cert: Buffer;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'tidemark-pgsocket-unit-'));
  const made = selfSigned(dir, 'server', { subject: '/CN=localhost', san: 'DNS:localhost,IP:127.0.0.1' });
  key = readFileSync(made.key);
  cert = readFileSync(made.cert);
});
after(() => rmSync(dir, { recursive: true, force: true }));

const message = (type: string, body: Buffer): Buffer => {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeUInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
};
const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
};
const errorResponse = (code: string, text: string, severity = 'ERROR') =>
  message('E', Buffer.from(`S${severity}\0C${code}\0M${text}\0\0`));
const authOk = message('R', int32(0));
const ready = message('Z', Buffer.from('I'));
const TERMINATED = 'terminating connection due to administrator command';

/**
 * A server that follows `steps`, one a connection. A query is answered with an error naming the
 * connection's number; a query `terminate` with a FATAL error and at once a reset (RST), as a
 * backend killed by pg_terminate_backend whose client wrote meanwhile; a `COPY` takes COPY data.
 */
async function scripted(steps: Step[]): Promise<{ url: string; seen: Seen[]; close: () => Promise<void> }> {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((raw) => {
    sockets.add(raw);
    raw.on('error', () => undefined);
    const n = seen.length;
    const step = steps[n];
    const conn: Seen = { tls: false, passwords: [], copied: 0 };
    seen.push(conn);
    if (!step) return raw.destroy();
    const answerStartup = (s: Socket) => {
      if (step.startup === 'accept') return s.write(Buffer.concat([authOk, ready]));
      const refusal = errorResponse(step.startup.code, step.startup.message, 'FATAL');
      if (step.startup.authenticated) s.write(authOk);
      if (!step.startup.split) return s.end(refusal);
      s.write(refusal.subarray(0, 3));
      setTimeout(() => s.end(refusal.subarray(3)), 30);
    };
    const serve = (s: Socket) => {
      let got = Buffer.alloc(0);
      const onData = (chunk: Buffer) => {
        got = Buffer.concat([got, chunk]);
        while (got.length >= 4) {
          if (!conn.startup) {
            const len = got.readUInt32BE(0);
            if (got.length < len) return;
            const first = got.subarray(0, len);
            got = got.subarray(len);
            if (len === 8 && first.readUInt32BE(4) === SSL_REQUEST_CODE) {
              if (step.ssl === 'S-then-close') return void s.end('S');
              s.write(step.ssl ?? 'N');
              if (step.ssl !== 'S') continue;
              s.off('data', onData);
              const secure = new TLSSocket(s, { isServer: true, key, cert });
              secure.on('error', () => undefined);
              conn.tls = true;
              return serve(secure);
            }
            conn.startup = Buffer.from(first);
            if (step.md5) s.write(message('R', Buffer.concat([int32(5), randomBytes(4)])));
            else answerStartup(s);
            continue;
          }
          if (got.length < 5) return;
          const len = got.readUInt32BE(1);
          if (got.length < 1 + len) return;
          const type = String.fromCharCode(got[0]!);
          const body = got.subarray(5, 1 + len).toString('utf8');
          got = got.subarray(1 + len);
          if (type === 'p') {
            conn.passwords.push(body.replace(/\0$/, ''));
            answerStartup(s);
          }
          if (type === 'Q' && body.startsWith('terminate')) {
            s.write(errorResponse('57P01', TERMINATED, 'FATAL'));
            (raw as Socket & { resetAndDestroy(): void }).resetAndDestroy();
            return;
          }
          if (type === 'Q' && body.startsWith('COPY')) {
            s.write(message('G', Buffer.from([0, 0, 1, 0, 0]))); // CopyInResponse: text, one column
            // A busy server: the client's buffers fill, its writes return false until 'drain'.
            s.pause();
            setTimeout(() => s.resume(), 300);
            continue;
          }
          if (type === 'd') conn.copied += body.split('\n').length - 1;
          if (type === 'c')
            s.write(Buffer.concat([message('C', Buffer.from(`COPY ${conn.copied}\0`)), ready]));
          if (type === 'Q')
            s.write(Buffer.concat([errorResponse('XX000', `answered by connection ${n + 1}`), ready]));
          if (type === 'X') s.end();
        }
      };
      s.on('data', onData);
    };
    serve(raw);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `postgres://tidemark:pw@127.0.0.1:${port}/app`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** The answer to a query: which connection the client talks through. */
const answeredBy = (c: { query(q: string): Promise<unknown> }) =>
  c.query('select 1').then(
    () => assert.fail('the scripted server answers queries with an error'),
    (e: Error) => e.message,
  );

const refusalOf = (p: Promise<unknown>) =>
  p.then(
    () => assert.fail('connected'),
    (e: Error & { code?: string }) => e,
  );

const noEncryption = {
  code: '28000',
  message: 'no pg_hba.conf entry for host "127.0.0.1", user "tidemark", database "app", no encryption',
};

test('allow: a startup refused on the plain connection is sent again, the same bytes, over TLS on a second', async () => {
  const server = await scripted([{ startup: noEncryption }, { ssl: 'S', startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=allow`);
  try {
    await c.connect();
    assert.equal(await answeredBy(c), 'answered by connection 2');
    assert.deepEqual(
      server.seen.map((s) => s.tls),
      [false, true],
    );
    assert.match(server.seen[0]!.startup!.toString('latin1'), /user\0tidemark\0database\0app\0/);
    assert.deepEqual(server.seen[1]!.startup, server.seen[0]!.startup);
  } finally {
    await c.end();
    await server.close();
  }
});

test('prefer: a startup refused over TLS is sent again in plain on a second connection; a query queued meanwhile goes there', async () => {
  const refused = {
    code: '28000',
    message: 'pg_hba.conf rejects connection for host "127.0.0.1", SSL encryption',
  };
  const server = await scripted([{ ssl: 'S', startup: refused }, { startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=prefer`);
  try {
    const connected = c.connect();
    const queued = answeredBy(c);
    await connected;
    assert.equal(await queued, 'answered by connection 2');
    assert.deepEqual(
      server.seen.map((s) => s.tls),
      [true, false],
    );
    assert.deepEqual(server.seen[1]!.startup, server.seen[0]!.startup);
  } finally {
    await c.end();
    await server.close();
  }
});

test('prefer: a TLS handshake the server cuts off goes on in plain on a second connection, as libpq', async () => {
  const server = await scripted([{ ssl: 'S-then-close', startup: 'accept' }, { startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=prefer`);
  try {
    await c.connect();
    assert.equal(await answeredBy(c), 'answered by connection 2');
    assert.equal(server.seen.length, 2);
    assert.equal(server.seen[1]!.tls, false);
  } finally {
    await c.end();
    await server.close();
  }
});

test('prefer: a password refused over TLS is asked for again in plain (as libpq), and pg answers the new salt', async () => {
  const wrong = { code: '28P01', message: 'password authentication failed for user "tidemark"' };
  const server = await scripted([
    { ssl: 'S', md5: true, startup: wrong },
    { md5: true, startup: 'accept' },
  ]);
  const c = pgClient(`${server.url}?sslmode=prefer`);
  try {
    await c.connect();
    assert.equal(await answeredBy(c), 'answered by connection 2');
    const [first, second] = server.seen;
    assert.equal(first!.passwords.length, 1);
    assert.equal(second!.passwords.length, 1);
    assert.match(second!.passwords[0]!, /^md5[0-9a-f]{32}$/);
    assert.notEqual(second!.passwords[0], first!.passwords[0], 'hashed with the second salt');
  } finally {
    await c.end();
    await server.close();
  }
});

test('an ErrorResponse that arrives in pieces is read whole before the next attempt', async () => {
  const server = await scripted([
    { startup: { ...noEncryption, split: true } },
    { ssl: 'S', startup: 'accept' },
  ]);
  const c = pgClient(`${server.url}?sslmode=allow`);
  try {
    await c.connect();
    assert.equal(await answeredBy(c), 'answered by connection 2');
  } finally {
    await c.end();
    await server.close();
  }
});

test('allow on a server without TLS: the error is the plain refusal, explained, not "does not support SSL"', async () => {
  const server = await scripted([{ startup: noEncryption }, { ssl: 'N', startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=allow`);
  try {
    const err = await refusalOf(c.connect());
    assert.equal(err.code, '28000');
    assert.match(
      err.message,
      /refuses connections without TLS \(no pg_hba\.conf entry .*\), and sslmode=allow/,
    );
    assert.equal(server.seen.length, 2);
    assert.equal(server.seen[1]!.startup, undefined, 'no plain startup after the "N"');
  } finally {
    await server.close();
  }
});

test('prefer: after AuthenticationOk a refusal (a missing database) is final, one connection, as libpq', async () => {
  const missing = { code: '3D000', message: 'database "app" does not exist', authenticated: true };
  const server = await scripted([{ ssl: 'S', startup: missing }, { startup: 'accept' }]);
  try {
    const err = await refusalOf(pgClient(`${server.url}?sslmode=prefer`).connect());
    assert.equal(err.code, '3D000');
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

test('prefer to a port nothing listens on: the network error, no second attempt', async () => {
  const server = await scripted([]);
  await server.close();
  const err = await refusalOf(pgClient(`${server.url}?sslmode=prefer`).connect());
  assert.equal(err.code, 'ECONNREFUSED');
});

test("a server's FATAL error sent just before a reset reaches the query, under prefer as under disable", async () => {
  for (const mode of ['disable', 'prefer', 'allow']) {
    const server = await scripted([{ startup: 'accept' }]);
    const c = pgClient(`${server.url}?sslmode=${mode}`);
    c.on('error', () => undefined);
    try {
      await c.connect();
      for (let i = 0; i < 3; i++) c.query('select 1').catch(() => undefined);
      await assert.rejects(c.query('terminate'), new RegExp(TERMINATED), mode);
    } finally {
      await c.end();
      await server.close();
    }
  }
});

test("COPY FROM through prefer's socket: pg-copy-streams waits for 'drain' after each piece and gets it", async () => {
  const server = await scripted([{ startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=prefer`);
  try {
    await c.connect();
    const rows = Array.from({ length: 200_000 }, (_, i) => [`row ${i} ${'x'.repeat(100)}`]);
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('the COPY did not finish within 20 s')), 20_000);
    });
    assert.equal(
      await Promise.race([copyRows(c, 'items', ['v'], rows), stuck]).finally(() => clearTimeout(timer)),
      200_000,
    );
    assert.equal(server.seen[0]!.copied, 200_000);
  } finally {
    await c.end();
    await server.close();
  }
});

test('COPY TO on a prefer connection is refused before pg queues it, naming the sslmodes that work; the client goes on', async () => {
  const server = await scripted([{ startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=prefer`);
  try {
    await c.connect();
    const busy = answeredBy(c); // COPY TO asked for while another query runs: it would queue
    assert.throws(
      () => c.query(copyTo('COPY t TO STDOUT')),
      /COPY TO .*sslmode=prefer or allow.*sslmode=disable, require or verify-full/,
    );
    assert.equal(await busy, 'answered by connection 1');
    assert.equal(await answeredBy(c), 'answered by connection 1', 'the client is not wedged');
  } finally {
    await c.end();
    await server.close();
  }
});

test("the socket has every member node-postgres (its SCRAM channel binding included), pg-pool and pg-copy-streams' COPY FROM use on a connection's stream", () => {
  const require = createRequire(import.meta.url);
  const pgLib = dirname(require.resolve('pg'));
  const files = [
    ...['connection', 'client', 'query', 'crypto/sasl'].map((f) => join(pgLib, `${f}.js`)),
    require.resolve('pg-pool'),
    join(dirname(require.resolve('pg-copy-streams')), 'copy-from.js'),
  ];
  const used = new Set(
    files.flatMap((f) => [...readFileSync(f, 'utf8').matchAll(/\bstream\.(\w+)/g)].map((m) => m[1]!)),
  );
  assert.ok(used.has('write') && used.has('cork'), `the scan found pg's calls: ${[...used].join(', ')}`);
  used.delete('getSecureStream'); // pg's stream module (lib/stream.js), not a connection's stream
  const socket = new SslModeSocket([false]);
  assert.deepEqual(
    [...used].filter((member) => !(member in socket)),
    [],
  );
});
