// Issue 13: the Temporal connection settings from @temporalio/envconfig (environment variables over a
// TOML profile), resolved in one place; every wrong setting is named, and no secret is printed.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import type { ServerHttp2Session } from 'node:http2';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError, loadConfig, secretsOf } from '../../config/env.js';
import { describeTemporal, resolveTemporal, temporalConnectionOptions } from '../../config/temporal.js';
import {
  connectTemporal,
  explainConnectError,
  TemporalConnectError,
} from '../../workers/temporal-connection.js';
import { selfSigned } from '../helpers/certs.js';

const dir = mkdtempSync(join(tmpdir(), 'tidemark-temporal-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const API_KEY = 'tmprl-secret-api-key-0123456789';
/** A real key and its self-signed certificate (the key and certificate are checked before connecting). */
function keyPair(name: string): { key: string; cert: string } {
  const made = selfSigned(dir, name, { subject: `/CN=${name}`, keyType: 'rsa', certSuffix: '.pem' });
  return { key: readFileSync(made.key, 'utf8'), cert: readFileSync(made.cert, 'utf8') };
}
const { key: KEY_PEM, cert: CERT_PEM } = keyPair('fixture');
/** A line from the middle of the key: its secret part, never printed. */
const KEY_LINE = KEY_PEM.split('\n')[5]!;
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};
const certPath = file('client.pem', CERT_PEM);
const keyPath = file('client.key', KEY_PEM);
const caPath = file('ca.pem', CERT_PEM);

/** The error `fn` throws (it must throw). */
function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (err) {
    return err as Error;
  }
  assert.fail('expected an error');
}

function noSecret(text: string): void {
  assert.doesNotMatch(text, /tmprl-secret|SECRETKEYMATERIAL|CERTMATERIAL/);
  assert.ok(!text.includes(KEY_LINE), 'the client key was printed');
}

test('nothing set: the dev server on 127.0.0.1:TEMPORAL_PORT, namespace "default", plain text', () => {
  const config = loadConfig({ TEMPORAL_PORT: '7455' });
  assert.equal(config.TEMPORAL_ADDRESS, undefined, 'no address set: npm start runs a dev server');
  assert.equal(config.TEMPORAL_NAMESPACE, 'default');
  assert.equal(config.temporal.address, '127.0.0.1:7455');
  assert.equal(config.temporal.tls, 'off');
  assert.equal(
    describeTemporal(config.temporal),
    '127.0.0.1:7455 (TEMPORAL_ADDRESS unset: 127.0.0.1:TEMPORAL_PORT), namespace default, plain text',
  );
  const options = temporalConnectionOptions(config.temporal);
  assert.equal(options.address, '127.0.0.1:7455');
  assert.ok(!options.tls, 'no TLS');
});

test('environment variables: address, namespace, mTLS files and the API key; one source of truth for the namespace', () => {
  const env = {
    TEMPORAL_ADDRESS: 'temporal.example.test:7233',
    TEMPORAL_NAMESPACE: 'payments',
    TEMPORAL_API_KEY: API_KEY,
    TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
    TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: caPath,
    TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
  };
  const config = loadConfig(env);
  assert.equal(config.TEMPORAL_NAMESPACE, 'payments');
  assert.equal(config.TEMPORAL_ADDRESS, 'temporal.example.test:7233');
  assert.equal(config.temporal.tls, 'mtls');
  assert.equal(config.temporal.addressFrom, 'TEMPORAL_ADDRESS');
  const line = describeTemporal(config.temporal);
  assert.equal(line, 'temporal.example.test:7233 (TEMPORAL_ADDRESS), namespace payments, mTLS, API key');
  noSecret(line);
  noSecret(JSON.stringify(config.temporal));
  const options = temporalConnectionOptions(config.temporal);
  assert.equal(options.apiKey, API_KEY);
  const tls = options.tls as {
    serverNameOverride?: string;
    clientCertPair?: { crt: Uint8Array; key: Uint8Array };
  };
  assert.equal(tls.serverNameOverride, 'temporal.internal');
  assert.equal(Buffer.from(tls.clientCertPair!.key).toString(), KEY_PEM);
  assert.ok(secretsOf(config).includes(API_KEY), 'the API key is redacted from log lines and alerts');
  // An API key alone: TLS with the system's roots (Temporal Cloud).
  assert.equal(loadConfig({ TEMPORAL_API_KEY: API_KEY }).temporal.tls, 'tls');
});

test('a TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE); environment variables override it', () => {
  const toml = file(
    'profile.toml',
    [
      '[profile.default]',
      'address = "127.0.0.1:7999"',
      '',
      '[profile.prod]',
      'address = "prod.temporal.test:7233"',
      'namespace = "tidemark-prod"',
      `api_key = "${API_KEY}"`,
      '[profile.prod.tls]',
      `client_cert_path = "${certPath}"`,
      `client_key_path = "${keyPath}"`,
      `server_ca_cert_path = "${caPath}"`,
      '',
    ].join('\n'),
  );
  const prod = loadConfig({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' });
  assert.equal(prod.TEMPORAL_NAMESPACE, 'tidemark-prod');
  assert.equal(prod.temporal.address, 'prod.temporal.test:7233');
  assert.equal(prod.temporal.addressFrom, `address in profile "prod" of ${toml}`);
  assert.equal(prod.temporal.tls, 'mtls');
  assert.equal(prod.temporal.apiKey, true);
  assert.ok(secretsOf(prod).includes(API_KEY), "the profile's API key is a secret too");
  assert.equal(temporalConnectionOptions(prod.temporal).apiKey, API_KEY);
  noSecret(describeTemporal(prod.temporal));
  // The default profile when TEMPORAL_PROFILE is unset.
  assert.equal(loadConfig({ TEMPORAL_CONFIG_FILE: toml }).temporal.address, '127.0.0.1:7999');
  const overridden = loadConfig({
    TEMPORAL_CONFIG_FILE: toml,
    TEMPORAL_PROFILE: 'prod',
    TEMPORAL_ADDRESS: 'other.test:7233',
    TEMPORAL_NAMESPACE: 'other',
  });
  assert.deepEqual(
    [overridden.temporal.address, overridden.temporal.addressFrom, overridden.TEMPORAL_NAMESPACE],
    ['other.test:7233', 'TEMPORAL_ADDRESS', 'other'],
  );
});

test('a missing or unreadable certificate or key file names the variable (or the TOML key) and the path', () => {
  const missing = join(dir, 'nope.pem');
  const env = resolveTemporal({
    TEMPORAL_ADDRESS: 'x.test:7233',
    TEMPORAL_TLS_CLIENT_CERT_PATH: missing,
    TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath,
  });
  const e1 = thrown(() => temporalConnectionOptions(env));
  assert.ok(e1 instanceof ConfigError);
  assert.equal(e1.variable, 'TEMPORAL_TLS_CLIENT_CERT_PATH');
  assert.match(
    e1.message,
    new RegExp(
      `TEMPORAL_TLS_CLIENT_CERT_PATH: cannot read the client certificate at ${missing} \\(no such file\\)`,
    ),
  );

  const unreadable = file('locked.key', KEY_PEM);
  chmodSync(unreadable, 0o000);
  const locked = resolveTemporal({
    TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
    TEMPORAL_TLS_CLIENT_KEY_PATH: unreadable,
  });
  // root reads any file: then the check is that a readable file is accepted.
  if (process.getuid?.() !== 0) {
    const e2 = thrown(() => temporalConnectionOptions(locked));
    assert.match(
      e2.message,
      /TEMPORAL_TLS_CLIENT_KEY_PATH: cannot read the client key at .*locked\.key \(EACCES\)/,
    );
  } else assert.ok(temporalConnectionOptions(locked).tls);

  const toml = file(
    'missing-ca.toml',
    `[profile.default]\naddress = "a.test:7233"\n[profile.default.tls]\nserver_ca_cert_path = "${missing}"\n`,
  );
  const e3 = thrown(() => temporalConnectionOptions(resolveTemporal({ TEMPORAL_CONFIG_FILE: toml })));
  assert.match(
    e3.message,
    new RegExp(
      `^tls\\.server_ca_cert_path in profile "default" of ${toml}: cannot read the server CA certificate at ${missing}`,
    ),
  );

  const notPem = file('not-pem.key', 'SECRETKEYMATERIAL only, no PEM armour\n');
  const e4 = thrown(() =>
    temporalConnectionOptions(
      resolveTemporal({ TEMPORAL_TLS_CLIENT_CERT_PATH: certPath, TEMPORAL_TLS_CLIENT_KEY_PATH: notPem }),
    ),
  );
  assert.match(e4.message, /TEMPORAL_TLS_CLIENT_KEY_PATH: the client key at .* is not a PEM file/);
  noSecret(e4.message);
});

test('a client key without a client certificate, and a certificate without its key, are refused by name', () => {
  const e1 = thrown(() => loadConfig({ TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath }));
  assert.ok(e1 instanceof ConfigError);
  assert.equal(e1.variable, 'TEMPORAL_TLS_CLIENT_KEY_PATH');
  assert.match(
    e1.message,
    /a client key is set but no client certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH/,
  );
  const e2 = thrown(() => loadConfig({ TEMPORAL_TLS_CLIENT_CERT_PATH: certPath }));
  assert.match(e2.message, /TEMPORAL_TLS_CLIENT_CERT_PATH: a client certificate is set but no client key/);
  const e3 = thrown(() => loadConfig({ TEMPORAL_TLS_CLIENT_KEY_DATA: KEY_PEM }));
  assert.match(e3.message, /TEMPORAL_TLS_CLIENT_KEY_DATA: a client key is set but no client certificate/);
  noSecret(e3.message);
  const toml = file('key-only.toml', `[profile.default.tls]\nclient_key_path = "${keyPath}"\n`);
  const e4 = thrown(() => loadConfig({ TEMPORAL_CONFIG_FILE: toml }));
  assert.match(
    e4.message,
    new RegExp(`^tls\\.client_key_path in profile "default" of ${toml}: a client key is set`),
  );
  const both = thrown(() =>
    loadConfig({ TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath, TEMPORAL_TLS_CLIENT_KEY_DATA: KEY_PEM }),
  );
  assert.match(
    both.message,
    /TEMPORAL_TLS_CLIENT_KEY_PATH \/ TEMPORAL_TLS_CLIENT_KEY_DATA .*: give the file path or the PEM data, not both/,
  );
  noSecret(both.message);
});

test('an unknown profile, a missing config file and a file that does not parse are named; no secret printed', () => {
  const toml = file(
    'two.toml',
    '[profile.default]\naddress = "a.test:1"\n[profile.staging]\naddress = "b.test:2"\n',
  );
  const e1 = thrown(() => loadConfig({ TEMPORAL_CONFIG_FILE: toml, TEMPORAL_PROFILE: 'prod' }));
  assert.ok(e1 instanceof ConfigError);
  assert.equal(e1.variable, 'TEMPORAL_PROFILE');
  assert.match(
    e1.message,
    new RegExp(`there is no profile "prod" in ${toml} \\(it has: default, staging\\)`),
  );
  const e2 = thrown(() => loadConfig({ TEMPORAL_PROFILE: 'prod' }));
  assert.match(
    e2.message,
    /TEMPORAL_PROFILE: profile "prod" was asked for, but there is no Temporal config file/,
  );

  const missing = join(dir, 'absent.toml');
  const e3 = thrown(() => loadConfig({ TEMPORAL_CONFIG_FILE: missing }));
  assert.match(
    e3.message,
    new RegExp(`^environment variable TEMPORAL_CONFIG_FILE: cannot read ${missing} \\(no such file\\)`),
  );

  const broken = file('broken.toml', `[profile.default]\napi_key = "${API_KEY}"\naddress = "a.test:1\n`);
  const e4 = thrown(() => loadConfig({ TEMPORAL_CONFIG_FILE: broken }));
  assert.match(
    e4.message,
    new RegExp(`TEMPORAL_CONFIG_FILE \\(${broken}\\): not valid TOML at line 3, column \\d+`),
  );
  noSecret(e4.message);

  const typo = file('typo.toml', `[profile.default.tls]\nclient_cert_pth = "${certPath}"\n`);
  const e5 = thrown(() => loadConfig({ TEMPORAL_CONFIG_FILE: typo }));
  assert.match(e5.message, /key\(s\) unrecognized in profile\.default\.tls: client_cert_pth/);

  const badAddress = file('bad-address.toml', '[profile.default]\naddress = "no-port"\n');
  const e6 = thrown(() => loadConfig({ TEMPORAL_CONFIG_FILE: badAddress }));
  assert.match(
    e6.message,
    /^address in profile "default" of .*bad-address\.toml: "no-port" is not host:port/,
  );
});

test('an unreachable address names the address and the setting it came from; the API key is not printed', async () => {
  const port = await new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const settings = resolveTemporal({ TEMPORAL_ADDRESS: `127.0.0.1:${port}`, TEMPORAL_API_KEY: API_KEY });
  const err = await connectTemporal(settings, { connectTimeout: 3_000 }).then(
    () => assert.fail('connected to a closed port'),
    (e: unknown) => e as Error,
  );
  assert.ok(err instanceof TemporalConnectError, String(err));
  assert.match(err.message, new RegExp(`Temporal at 127\\.0\\.0\\.1:${port} \\(from TEMPORAL_ADDRESS\\)`));
  assert.match(err.message, /fix TEMPORAL_ADDRESS/);
  noSecret(err.message);
});

test('a refused TLS handshake points at the TLS settings; a refused API key at TEMPORAL_API_KEY', () => {
  const mtls = resolveTemporal({
    TEMPORAL_ADDRESS: 'proxy.test:443',
    TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
    TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath,
  });
  const tls = explainConnectError(new Error('tls handshake eof'), mtls);
  assert.match(
    tls.message,
    /^Temporal at proxy\.test:443 \(from TEMPORAL_ADDRESS\) refused the TLS connection/,
  );
  assert.match(tls.message, /check TEMPORAL_TLS_CLIENT_CERT_PATH \/ TEMPORAL_TLS_CLIENT_KEY_PATH/);
  const keyed = resolveTemporal({ TEMPORAL_ADDRESS: 'cloud.test:7233', TEMPORAL_API_KEY: API_KEY });
  const auth = explainConnectError(new Error(`16 UNAUTHENTICATED: bad key ${API_KEY}`), keyed, [API_KEY]);
  assert.match(auth.message, /refused the API key .*check TEMPORAL_API_KEY/);
  noSecret(auth.message);
});

test('npm start with an address set: one that does not answer is named with its setting; a wrong file at once', async () => {
  const { startTemporalServer } = await import('../../bin/temporal-server.js');
  const port = await new Promise<number>((resolve) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const toml = file('dev.toml', `[profile.default]\naddress = "127.0.0.1:${port}"\n`);
  const silent = () => undefined;
  const err = await startTemporalServer(loadConfig({ TEMPORAL_CONFIG_FILE: toml }), silent).then(
    () => assert.fail('a server answered on a closed port'),
    (e: unknown) => e as Error,
  );
  assert.match(
    err.message,
    new RegExp(
      `cannot reach Temporal at 127\\.0\\.0\\.1:${port} \\(from address in profile "default" of ${toml}\\)`,
    ),
  );
  assert.match(
    err.message,
    /Or unset the address \(address in profile "default" of .*\) to let tidemark dev run a dev server\.$/,
  );

  const started = Date.now();
  const missing = join(dir, 'absent-client.pem');
  const bad = await startTemporalServer(
    loadConfig({
      TEMPORAL_ADDRESS: `127.0.0.1:${port}`,
      TEMPORAL_TLS_CLIENT_CERT_PATH: missing,
      TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath,
    }),
    silent,
  ).then(
    () => assert.fail('started with a missing certificate'),
    (e: unknown) => e as Error,
  );
  assert.ok(bad instanceof ConfigError, String(bad));
  assert.match(bad.message, /TEMPORAL_TLS_CLIENT_CERT_PATH: cannot read the client certificate/);
  assert.ok(
    Date.now() - started < 5_000,
    'a wrong setting is not retried like an address that does not answer yet',
  );
});

test('TEMPORAL_TLS is a boolean the way the Temporal CLI reads it: TRUE turns TLS on, a word it does not know is refused', () => {
  // envconfig reads anything but "1" and "true" as false: TEMPORAL_TLS=TRUE turned TLS off, and an API
  // key then went to the server in plain text.
  for (const on of ['true', 'TRUE', 'True', '1']) {
    const s = resolveTemporal({
      TEMPORAL_ADDRESS: 'cloud.test:7233',
      TEMPORAL_TLS: on,
      TEMPORAL_API_KEY: API_KEY,
    });
    assert.equal(s.tls, 'tls', `TEMPORAL_TLS=${on}`);
    assert.ok(temporalConnectionOptions(s).tls, `TEMPORAL_TLS=${on}: the connection uses TLS`);
  }
  for (const off of ['false', 'FALSE', '0']) {
    const s = resolveTemporal({ TEMPORAL_ADDRESS: 'cloud.test:7233', TEMPORAL_TLS: off });
    assert.equal(s.tls, 'off', `TEMPORAL_TLS=${off}`);
    assert.equal(temporalConnectionOptions(s).tls, false, `TEMPORAL_TLS=${off}`);
  }
  for (const word of ['yes', 'on', 'enabled', 'tru']) {
    const err = thrown(() =>
      resolveTemporal({ TEMPORAL_ADDRESS: 'cloud.test:7233', TEMPORAL_TLS: word, TEMPORAL_API_KEY: API_KEY }),
    );
    assert.ok(err instanceof ConfigError, String(err));
    assert.match(err.message, /^environment variable TEMPORAL_TLS: .*true or false/);
    noSecret(err.message);
  }
  const host = thrown(() => resolveTemporal({ TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: 'yes' }));
  assert.match(host.message, /^environment variable TEMPORAL_TLS_DISABLE_HOST_VERIFICATION: /);
});

test('an API key with TLS turned off is refused for a server beyond loopback (it would travel in plain text)', () => {
  const err = thrown(() =>
    resolveTemporal({
      TEMPORAL_ADDRESS: 'cloud.test:7233',
      TEMPORAL_TLS: 'false',
      TEMPORAL_API_KEY: API_KEY,
    }),
  );
  assert.ok(err instanceof ConfigError, String(err));
  assert.match(err.message, /^environment variable TEMPORAL_TLS: .*TEMPORAL_API_KEY.*plain text/);
  noSecret(err.message);
  // A local proxy or dev server on loopback may take it in plain text (a TLS-terminating sidecar).
  for (const address of ['127.0.0.1:7233', 'localhost:7233', '[::1]:7233'])
    assert.equal(
      resolveTemporal({ TEMPORAL_ADDRESS: address, TEMPORAL_TLS: 'false', TEMPORAL_API_KEY: API_KEY }).tls,
      'off',
      address,
    );
});

test('an API key or a gRPC header value that a header cannot carry (a trailing newline from a file) is named at once, not printed', () => {
  const profile = file('newline-key.toml', `[profile.default]\napi_key = "${API_KEY}\\n"\n`);
  const cases: [NodeJS.ProcessEnv, RegExp][] = [
    [{ TEMPORAL_API_KEY: `${API_KEY}\n` }, /^environment variable TEMPORAL_API_KEY: /],
    [{ TEMPORAL_API_KEY: ` ${API_KEY}` }, /^environment variable TEMPORAL_API_KEY: /],
    [{ TEMPORAL_API_KEY: `${API_KEY}é` }, /^environment variable TEMPORAL_API_KEY: /],
    [{ TEMPORAL_CONFIG_FILE: profile }, /^api_key in profile "default" of .*newline-key\.toml: /],
    [
      { TEMPORAL_GRPC_META_AUTHORIZATION: `Bearer ${API_KEY}\r\n` },
      /^environment variable TEMPORAL_GRPC_META_AUTHORIZATION: /,
    ],
  ];
  for (const [env, named] of cases) {
    const err = thrown(() => resolveTemporal({ TEMPORAL_ADDRESS: 'cloud.test:7233', ...env }));
    assert.ok(err instanceof ConfigError, String(err));
    assert.match(err.message, named);
    assert.match(err.message, /line break|printable ASCII/);
    noSecret(err.message);
  }
});

/** A real HTTP/2 server on loopback that answers every call as a proxy refusing its credentials does. */
async function refusingServer(): Promise<{ address: string; seen: string[]; close(): Promise<void> }> {
  const { createServer: createH2 } = await import('node:http2');
  const seen: string[] = [];
  const sessions = new Set<ServerHttp2Session>();
  const server = createH2((req, res) => {
    seen.push(String(req.headers.authorization ?? ''));
    res.writeHead(401, { 'content-type': 'text/plain' });
    res.end('unauthorized');
  });
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        // The clients keep their connections open: close() waits for them otherwise.
        for (const session of sessions) session.destroy();
      }),
  };
}

test('a server that refuses the credentials (401): the message names the credential settings, not "start it" nor TLS', async () => {
  const proxy = await refusingServer();
  try {
    const failure = async (env: NodeJS.ProcessEnv, kind: 'client' | 'worker'): Promise<Error> => {
      const s = resolveTemporal({ TEMPORAL_ADDRESS: proxy.address, TEMPORAL_TLS: 'false', ...env });
      const { connectTemporalWorker } = await import('../../workers/temporal-connection.js');
      const connecting =
        kind === 'client'
          ? connectTemporal(s, { connectTimeout: 10_000 })
          : connectTemporalWorker({ temporal: s });
      return await connecting.then(
        () => assert.fail('connected to a server that refuses every call'),
        (e: unknown) => e as Error,
      );
    };
    for (const kind of ['client', 'worker'] as const) {
      // The authorization header given as gRPC metadata: it is the setting to check.
      const meta = await failure({ TEMPORAL_GRPC_META_AUTHORIZATION: `Bearer ${API_KEY}` }, kind);
      assert.ok(meta instanceof TemporalConnectError, String(meta));
      assert.match(meta.message, /refused the credentials .*check TEMPORAL_GRPC_META_AUTHORIZATION/, kind);
      assert.doesNotMatch(meta.message, /start it|refused the TLS connection/, kind);
      noSecret(meta.message);
      // No credentials at all: the server wants some.
      const none = await failure({}, kind);
      assert.match(none.message, /refused the credentials .*set TEMPORAL_API_KEY/, kind);
      assert.doesNotMatch(none.message, /start it|refused the TLS connection/, kind);
    }
    assert.ok(proxy.seen.includes(`Bearer ${API_KEY}`), 'the header reached the server');
  } finally {
    await proxy.close();
  }
});

test('a plain connection to a server that speaks TLS says so and names TEMPORAL_TLS (was "cannot reach ... start it")', async () => {
  const { createServer: createTls } = await import('node:tls');
  const { readFileSync } = await import('node:fs');
  const { key, cert } = selfSigned(dir, 'tls-server', {
    subject: '/CN=localhost',
    keyType: 'rsa',
    days: 1,
    certSuffix: '.pem',
  });
  // A real TLS server (HTTP/2 offered): it answers the handshake, and nothing in plain text.
  const sockets = new Set<Socket>();
  const server = createTls(
    { key: readFileSync(key), cert: readFileSync(cert), ALPNProtocols: ['h2'] },
    (s) => {
      s.on('error', () => undefined);
    },
  );
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = `127.0.0.1:${(server.address() as { port: number }).port}`;
  try {
    const { connectTemporalWorker } = await import('../../workers/temporal-connection.js');
    const s = resolveTemporal({ TEMPORAL_ADDRESS: address });
    for (const connecting of [
      () => connectTemporal(s, { connectTimeout: 5_000 }),
      () => connectTemporalWorker({ temporal: s }),
    ]) {
      const err = await connecting().then(
        () => assert.fail('a plain connection to a TLS server succeeded'),
        (e: unknown) => e as Error,
      );
      assert.ok(err instanceof TemporalConnectError, String(err));
      assert.match(err.message, new RegExp(`Temporal at ${address} \\(from TEMPORAL_ADDRESS\\) speaks TLS`));
      assert.match(err.message, /set TEMPORAL_TLS=true/);
      assert.doesNotMatch(err.message, /start it/);
    }
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  }
});

test('a client key that does not parse, or is not the certificate\'s, is named before connecting (was "cannot reach ... start it")', () => {
  // A key pasted into TEMPORAL_TLS_CLIENT_KEY_DATA and cut short: the worker said "start it or fix TEMPORAL_ADDRESS".
  const cut = KEY_PEM.slice(0, KEY_PEM.length - 200) + '\n-----END PRIVATE KEY-----\n';
  const truncated = thrown(() =>
    temporalConnectionOptions(
      resolveTemporal({
        TEMPORAL_ADDRESS: 'x.test:7233',
        TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
        TEMPORAL_TLS_CLIENT_KEY_DATA: cut,
      }),
    ),
  );
  assert.ok(truncated instanceof ConfigError, String(truncated));
  assert.match(
    truncated.message,
    /^environment variable TEMPORAL_TLS_CLIENT_KEY_DATA: the client key is not/,
  );
  noSecret(truncated.message);

  const other = keyPair('other');
  const mismatch = thrown(() =>
    temporalConnectionOptions(
      resolveTemporal({
        TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
        TEMPORAL_TLS_CLIENT_KEY_PATH: file('other.key', other.key),
      }),
    ),
  );
  assert.match(
    mismatch.message,
    /^environment variable TEMPORAL_TLS_CLIENT_KEY_PATH: the client key is not the key of the client certificate \(TEMPORAL_TLS_CLIENT_CERT_PATH\)/,
  );
  assert.ok(!mismatch.message.includes(other.key.split('\n')[5]!), 'the key was printed');

  const badCa = file(
    'bad-ca.pem',
    '-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n',
  );
  const toml = file(
    'bad-ca.toml',
    `[profile.default]\naddress = "a.test:7233"\n[profile.default.tls]\nserver_ca_cert_path = "${badCa}"\n`,
  );
  const ca = thrown(() => temporalConnectionOptions(resolveTemporal({ TEMPORAL_CONFIG_FILE: toml })));
  assert.match(
    ca.message,
    /^tls\.server_ca_cert_path in profile "default" of .*: the server CA certificate is not a PEM certificate/,
  );
});

test('an IPv6 address is host:port for loadConfig as for the profile (one check, not two that disagree); a bad one is named', () => {
  // config/env.ts had its own pattern for TEMPORAL_ADDRESS (no ":" in the host): "[::1]:7233" was refused
  // from the environment and accepted from a profile.
  const config = loadConfig({ TEMPORAL_ADDRESS: '[::1]:7233' });
  assert.equal(config.temporal.address, '[::1]:7233');
  assert.equal(config.TEMPORAL_ADDRESS, '[::1]:7233');
  const bad = thrown(() => loadConfig({ TEMPORAL_ADDRESS: 'http://temporal.test:7233' }));
  assert.ok(bad instanceof ConfigError, String(bad));
  assert.match(
    bad.message,
    /^environment variable TEMPORAL_ADDRESS: "http:\/\/temporal\.test:7233" is not host:port/,
  );
});
