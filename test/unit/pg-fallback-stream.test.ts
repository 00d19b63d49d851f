// The second attempt of sslmode=allow/prefer (db/pg-fallback-stream.ts) against a scripted server
// speaking the start of the PostgreSQL protocol on loopback: which connections a client opens, with
// or without TLS, what each receives, and which refusal the caller is told.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { TLSSocket } from 'node:tls';
import { pgClient } from '../../db/pg-connection.js';
import { selfSigned } from '../helpers/certs.js';

const SSL_REQUEST_CODE = 80877103;

/** What the server does with one connection: its answer to an SSLRequest, then to the startup. */
interface Step {
  ssl?: 'S' | 'N';
  /** accept: AuthenticationOk, ReadyForQuery; or an ErrorResponse [code, message] (after AuthenticationOk when `authenticated`). */
  startup: 'accept' | { code: string; message: string; authenticated?: boolean; split?: boolean };
}

/** One connection as the server saw it. */
interface Seen {
  tls: boolean;
  startup?: Buffer;
}

let dir: string;
let key: Buffer;
let cert: Buffer;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'tidemark-pgfallback-unit-'));
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
const errorResponse = (code: string, text: string) =>
  message('E', Buffer.from(`SFATAL\0C${code}\0M${text}\0\0`));
const authOk = message('R', int32(0));
const ready = message('Z', Buffer.from('I'));

/** A server that follows `steps`, one a connection, and answers every query with the connection's number. */
async function scripted(steps: Step[]): Promise<{ url: string; seen: Seen[]; close: () => Promise<void> }> {
  const seen: Seen[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((raw) => {
    sockets.add(raw);
    raw.on('error', () => undefined);
    const n = seen.length;
    const step = steps[n];
    const conn: Seen = { tls: false };
    seen.push(conn);
    if (!step) return raw.destroy();
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
              s.write(step.ssl ?? 'N');
              if (step.ssl !== 'S') continue;
              s.off('data', onData);
              const secure = new TLSSocket(s, { isServer: true, key, cert });
              secure.on('error', () => undefined);
              conn.tls = true;
              return serve(secure);
            }
            conn.startup = Buffer.from(first);
            if (step.startup === 'accept') s.write(Buffer.concat([authOk, ready]));
            else {
              const refusal = errorResponse(step.startup.code, step.startup.message);
              if (step.startup.authenticated) s.write(authOk);
              if (step.startup.split) {
                s.write(refusal.subarray(0, 3));
                setTimeout(() => s.end(refusal.subarray(3)), 30);
              } else s.end(refusal);
            }
            continue;
          }
          if (got.length < 5) return;
          const len = got.readUInt32BE(1);
          if (got.length < 1 + len) return;
          const type = String.fromCharCode(got[0]!);
          got = got.subarray(1 + len);
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
    url: `postgres://tidemark@127.0.0.1:${port}/app`,
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
    const err = await c.connect().then(
      () => assert.fail('connected'),
      (e: Error & { code?: string }) => e,
    );
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

test('prefer: once the server accepted the TLS startup, its later refusal (a missing database) is final: one connection', async () => {
  const missing = { code: '3D000', message: 'database "app" does not exist', authenticated: true };
  const server = await scripted([{ ssl: 'S', startup: missing }, { startup: 'accept' }]);
  const c = pgClient(`${server.url}?sslmode=prefer`);
  try {
    const err = await c.connect().then(
      () => assert.fail('connected'),
      (e: Error & { code?: string }) => e,
    );
    assert.equal(err.code, '3D000');
    assert.equal(server.seen.length, 1);
  } finally {
    await server.close();
  }
});

test('prefer to a port nothing listens on: the network error, no second attempt', async () => {
  const server = await scripted([]);
  await server.close();
  const err = await pgClient(`${server.url}?sslmode=prefer`)
    .connect()
    .then(
      () => assert.fail('connected'),
      (e: Error & { code?: string }) => e,
    );
  assert.equal(err.code, 'ECONNREFUSED');
});
