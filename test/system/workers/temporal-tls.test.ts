// Issue 13: a worker and the CLI reach Temporal through a TLS-terminating proxy that requires client
// certificates (Debian's nginx with grpc_pass in front of the dev server), configured by Temporal's own
// variables (TEMPORAL_TLS_*) and by a TOML profile (TEMPORAL_CONFIG_FILE + TEMPORAL_PROFILE); a wrong
// client certificate and an untrusted server are refused with a message that names the TLS settings;
// TEMPORAL_API_KEY arrives at the proxy as "authorization: Bearer <key>" and is printed nowhere.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { selfSigned, signCert } from '../../helpers/certs.js';
import { insertOrders, ordersBetween } from '../../helpers/jobs.js';
import { freePort } from '../../helpers/net.js';
import { runToEnd } from '../../helpers/spawn.js';
import { eventually, realStack, uniqueQueue } from '../../helpers/temporal.js';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const API_KEY = `tm-test-key-${process.pid}-a1b2c3d4e5f6`;
const REFUSED_KEY = `tm-refused-key-${process.pid}-f6e5d4c3b2a1`;
const dir = mkdtempSync(join(tmpdir(), 'tidemark-temporal-tls-'));
const pem = (name: string) => join(dir, name);
let nginx: ChildProcess | undefined;
let proxyAddress = '';
const workers: ChildProcess[] = [];

// A server of its own: its messages name the namespace (default), and nginx proxies it.
const stack = realStack(
  async ({ env }) => {
    const pemFile = { keyType: 'rsa', certSuffix: '.pem' } as const;
    const good = selfSigned(dir, 'good-ca', { ...pemFile, subject: '/CN=tidemark test good CA' });
    const wrong = selfSigned(dir, 'wrong-ca', { ...pemFile, subject: '/CN=tidemark test wrong CA' });
    signCert(dir, good, 'server', {
      ...pemFile,
      subject: '/CN=localhost',
      san: 'IP:127.0.0.1,DNS:localhost',
      usage: 'serverAuth',
    });
    signCert(dir, good, 'client', { ...pemFile, subject: '/CN=tidemark-worker', usage: 'clientAuth' });
    signCert(dir, wrong, 'intruder', { ...pemFile, subject: '/CN=intruder', usage: 'clientAuth' });
    const port = await freePort();
    proxyAddress = `127.0.0.1:${port}`;
    writeFileSync(
      pem('nginx.conf'),
      `worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
events { worker_connections 256; }
http {
  log_format grpc '$remote_addr $status "$request_uri" auth="$http_authorization" client="$ssl_client_s_dn" verify=$ssl_client_verify';
  access_log ${dir}/access.log grpc;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  server {
    listen 127.0.0.1:${port} ssl http2;
    ssl_certificate ${dir}/server.pem;
    ssl_certificate_key ${dir}/server.key;
    ssl_client_certificate ${dir}/good-ca.pem;
    ssl_verify_client on;
    # Workers long-poll for up to 70 s.
    grpc_read_timeout 300s;
    grpc_send_timeout 300s;
    client_max_body_size 0;
    location / {
      # A key the proxy refuses, as a gateway checking API keys answers it.
      if ($http_authorization = "Bearer ${REFUSED_KEY}") { return 401; }
      grpc_pass grpc://${env.address};
    }
  }
}
`,
    );
    await startNginx();
  },
  { own: true },
);

/** nginx with the config written above (again after stopNginx: the same port); resolves once it listens. */
async function startNginx(): Promise<void> {
  // Debian's nginx is in /usr/sbin, which is not on every user's PATH.
  const child = spawn(
    existsSync('/usr/sbin/nginx') ? '/usr/sbin/nginx' : 'nginx',
    ['-p', dir, '-c', pem('nginx.conf'), '-e', pem('error.log'), '-g', 'daemon off;'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  nginx = child;
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  // nginx writes its pid file once its sockets listen, and removes it when it stops.
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode}):\n${out}`);
      return existsSync(pem('nginx.pid')) ? true : undefined;
    },
    30_000,
    'nginx to start',
  );
}

async function stopNginx(): Promise<void> {
  if (nginx && nginx.exitCode === null && nginx.signalCode === null) {
    const exited = new Promise((r) => nginx!.once('exit', r));
    nginx.kill('SIGTERM'); // fast shutdown: no waiting for open long polls
    await exited;
  }
  rmSync(pem('nginx.pid'), { force: true });
}

after(async () => {
  for (const w of workers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  await stopNginx();
  rmSync(dir, { recursive: true, force: true });
});

before(() => {
  // Nothing from the shell that runs the tests may choose another server, profile or key.
  for (const k of Object.keys(process.env)) if (/^TEMPORAL_(?!CLI$)/.test(k)) delete process.env[k];
});

/** The mTLS variables of a client holding `cert` (signed by the proxy's CA unless it is the intruder's). */
const tlsEnv = (cert: 'client' | 'intruder', ca = 'good-ca.pem'): Record<string, string> => ({
  TEMPORAL_ADDRESS: proxyAddress,
  TEMPORAL_TLS_CLIENT_CERT_PATH: pem(`${cert}.pem`),
  TEMPORAL_TLS_CLIENT_KEY_PATH: pem(`${cert}.key`),
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: pem(ca),
});

/** The body of a PEM file (its secret part): must appear in no output. */
const pemBody = (name: string): string =>
  readFileSync(pem(name), 'utf8')
    .split('\n')
    .filter((l) => l && !l.startsWith('-----'))
    .slice(1, 3)
    .join('\n');

/** The real worker entry point as a child process; resolves once it polls. */
async function startWorker(
  env: Record<string, string>,
): Promise<{ out: () => string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/worker.ts'], {
    cwd: root,
    env: { ...process.env, TIDEMARK_METRICS_PORT: '0', TIDEMARK_METRICS_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  workers.push(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`the worker exited (${child.exitCode}):\n${out}`);
      return /worker polling task queue/.test(out) ? true : undefined;
    },
    120_000,
    'the worker to poll',
  );
  return {
    out: () => out,
    async stop() {
      const exited = new Promise((r) => child.once('exit', r));
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

const cli = (args: string[], env: Record<string, string>) =>
  runToEnd(process.execPath, ['bin/tidemark.js', ...args], env);

/** Processes the window of sales-hourly starting at `start` through the CLI; returns its ledger row. */
async function processWindow(start: string, env: Record<string, string>) {
  const end = new Date(new Date(start).getTime() + 3_600_000).toISOString().replace('.000Z', 'Z');
  await insertOrders(stack.t.db, ordersBetween(`tls-${start}`, start, end, 12));
  const run = await cli(['backfill', 'sales-hourly', '--from', start, '--to', end], env);
  assert.equal(run.code, 0, `the CLI's backfill through the proxy failed:\n${run.out}\n${run.err}`);
  assert.match(run.out, /^done: processed 1, already done 0, running elsewhere 0, failed 0$/m, run.out);
  const row = await stack.t.db
    .selectFrom('job_windows')
    .select(['status', 'records_applied'])
    .where('job', '=', 'sales-hourly')
    .where('window_start', '=', new Date(start))
    .executeTakeFirstOrThrow();
  assert.deepEqual(row, { status: 'done', records_applied: 12 });
  return run;
}

const accessLog = () => (existsSync(pem('access.log')) ? readFileSync(pem('access.log'), 'utf8') : '');

test('TEMPORAL_TLS_* and TEMPORAL_API_KEY: a worker and the CLI connect through the mTLS proxy and process a window; the key reaches the proxy as a bearer token and is printed nowhere', async () => {
  const env = {
    DATABASE_URL: stack.t.url,
    TIDEMARK_TASK_QUEUE: uniqueQueue('tls-env'),
    ...tlsEnv('client'),
    TEMPORAL_API_KEY: API_KEY,
  };
  const worker = await startWorker(env);
  try {
    assert.match(
      worker.out(),
      new RegExp(`on Temporal ${proxyAddress} \\(TEMPORAL_ADDRESS\\), namespace default, mTLS, API key`),
    );
    const run = await processWindow('2026-05-01T10:00:00Z', env);
    for (const text of [run.out, run.err, worker.out()]) {
      assert.ok(!text.includes(API_KEY), `the API key was printed:\n${text}`);
      assert.ok(!text.includes(pemBody('client.key')), 'the client key was printed');
    }
  } finally {
    await worker.stop();
  }
  assert.ok(!worker.out().includes(API_KEY), `the API key was printed by the worker:\n${worker.out()}`);
  // nginx saw the requests with the client's certificate and the key as the authorization header.
  const log = accessLog();
  assert.match(log, new RegExp(`auth="Bearer ${API_KEY}" client="CN=tidemark-worker" verify=SUCCESS`));
  assert.match(log, /PollWorkflowTaskQueue/, 'the worker polled through the proxy');
  assert.match(log, /StartWorkflowExecution/, 'the CLI started the backfill through the proxy');
  // Every call of the worker (its native connection and its client) and of the CLI carried it.
  const calls = log.split('\n').filter(Boolean);
  const without = calls.filter((l) => !l.includes(`auth="Bearer ${API_KEY}"`));
  assert.deepEqual(without, [], `calls without the API key:\n${without.join('\n')}`);
  // And every one with the client's certificate, verified.
  const uncertified = calls.filter((l) => !l.includes('client="CN=tidemark-worker" verify=SUCCESS'));
  assert.deepEqual(uncertified, [], `calls without the client certificate:\n${uncertified.join('\n')}`);
});

test('a TOML profile (TEMPORAL_CONFIG_FILE + TEMPORAL_PROFILE): the worker and the CLI process a window through the proxy', async () => {
  const toml = pem('temporal.toml');
  writeFileSync(
    toml,
    [
      '[profile.default]',
      'address = "127.0.0.1:1"',
      '',
      '[profile.proxy]',
      `address = "${proxyAddress}"`,
      'namespace = "default"',
      '[profile.proxy.tls]',
      `client_cert_path = "${pem('client.pem')}"`,
      `client_key_path = "${pem('client.key')}"`,
      `server_ca_cert_path = "${pem('good-ca.pem')}"`,
      '',
    ].join('\n'),
  );
  const env = {
    DATABASE_URL: stack.t.url,
    TIDEMARK_TASK_QUEUE: uniqueQueue('tls-profile'),
    TEMPORAL_CONFIG_FILE: toml,
    TEMPORAL_PROFILE: 'proxy',
  };
  const worker = await startWorker(env);
  try {
    assert.match(
      worker.out(),
      new RegExp(
        `on Temporal ${proxyAddress} \\(address in profile \\\\"proxy\\\\" of ${toml}\\), namespace default, mTLS`,
      ),
    );
    await processWindow('2026-05-01T11:00:00Z', env);
  } finally {
    await worker.stop();
  }
});

test('a client certificate the proxy does not trust is refused, and the message names the TLS settings and holds no secret', async (t) => {
  const env = {
    DATABASE_URL: stack.t.url,
    TIDEMARK_TASK_QUEUE: uniqueQueue('tls-wrong'),
    ...tlsEnv('intruder'),
    TEMPORAL_API_KEY: API_KEY,
  };
  const refused = await cli(['jobs'], env);
  assert.equal(refused.code, 1, `${refused.out}\n${refused.err}`);
  t.diagnostic(refused.err.split('\n').at(-2) ?? '');
  assert.match(
    refused.err,
    new RegExp(
      `Temporal at ${proxyAddress} \\(from TEMPORAL_ADDRESS\\) refused the TLS connection \\(.+\\): check TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH`,
    ),
  );
  for (const text of [refused.out, refused.err]) {
    assert.ok(!text.includes(API_KEY), `the API key was printed:\n${text}`);
    assert.ok(!text.includes(pemBody('intruder.key')), 'the client key was printed');
    assert.ok(!text.includes(pemBody('intruder.pem')), 'the client certificate was printed');
  }
  // nginx refused it for the certificate.
  assert.match(readFileSync(pem('error.log'), 'utf8'), /client SSL certificate verify error/);

  // The worker, too, stops with the reason.
  const worker = await runToEnd(process.execPath, ['--import', 'tsx', 'workers/worker.ts'], {
    ...env,
    TIDEMARK_METRICS_PORT: '0',
    TIDEMARK_METRICS_HOST: '127.0.0.1',
  });
  assert.equal(worker.code, 1, `${worker.out}\n${worker.err}`);
  t.diagnostic(worker.out.split('\n').find((l) => l.includes('worker stopped')) ?? '');
  assert.match(
    worker.out,
    /worker stopped: Temporal at .* refused the TLS connection .*TEMPORAL_TLS_CLIENT_CERT_PATH/,
  );
  assert.ok(!`${worker.out}${worker.err}`.includes(API_KEY), 'the API key was printed by the worker');
});

test('a server certificate that TEMPORAL_TLS_SERVER_CA_CERT_PATH does not vouch for: refused, named', async (t) => {
  const refused = await cli(['jobs'], {
    DATABASE_URL: stack.t.url,
    ...tlsEnv('client', 'wrong-ca.pem'),
  });
  assert.equal(refused.code, 1, `${refused.out}\n${refused.err}`);
  t.diagnostic(refused.err.split('\n').at(-2) ?? '');
  assert.match(refused.err, /refused the TLS connection .*TEMPORAL_TLS_SERVER_CA_CERT_PATH/);
});

test('the proxy requires a client certificate: TLS without one is refused and the message names the client certificate settings', async (t) => {
  const refused = await cli(['jobs'], {
    DATABASE_URL: stack.t.url,
    TEMPORAL_ADDRESS: proxyAddress,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: pem('good-ca.pem'),
  });
  assert.equal(refused.code, 1, `${refused.out}\n${refused.err}`);
  t.diagnostic(refused.err.split('\n').at(-2) ?? '');
  assert.match(
    refused.err,
    /refused the TLS connection .*TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH/,
  );
  await eventually(
    async () =>
      /client sent no required SSL certificate/.test(readFileSync(pem('error.log'), 'utf8'))
        ? true
        : undefined,
    30_000,
    'nginx to log the missing client certificate',
  );
});

test('plain text to the TLS proxy names TEMPORAL_TLS; an API key the proxy refuses (401) names TEMPORAL_API_KEY, unprinted', async (t) => {
  const plain = await cli(['jobs'], { DATABASE_URL: stack.t.url, TEMPORAL_ADDRESS: proxyAddress });
  assert.equal(plain.code, 1, `${plain.out}\n${plain.err}`);
  t.diagnostic(plain.err.split('\n').at(-2) ?? '');
  assert.match(
    plain.err,
    new RegExp(`Temporal at ${proxyAddress} \\(from TEMPORAL_ADDRESS\\) speaks TLS.*set TEMPORAL_TLS=true`),
  );

  const env = { DATABASE_URL: stack.t.url, ...tlsEnv('client'), TEMPORAL_API_KEY: REFUSED_KEY };
  const refused = await cli(['jobs'], env);
  assert.equal(refused.code, 1, `${refused.out}\n${refused.err}`);
  t.diagnostic(refused.err.split('\n').at(-2) ?? '');
  assert.match(refused.err, /refused the API key .*check TEMPORAL_API_KEY/);
  const worker = await runToEnd(process.execPath, ['--import', 'tsx', 'workers/worker.ts'], {
    ...env,
    TIDEMARK_TASK_QUEUE: uniqueQueue('tls-refused-key'),
    TIDEMARK_METRICS_PORT: '0',
    TIDEMARK_METRICS_HOST: '127.0.0.1',
  });
  assert.equal(worker.code, 1, `${worker.out}\n${worker.err}`);
  assert.match(worker.out, /worker stopped: Temporal at .* refused the API key .*check TEMPORAL_API_KEY/);
  for (const text of [refused.out, refused.err, worker.out, worker.err])
    assert.ok(!text.includes(REFUSED_KEY), `the API key was printed:\n${text}`);
});

test('the proxy goes away while a worker polls through it and comes back: the worker reconnects by itself and processes the next window', async () => {
  const env = {
    DATABASE_URL: stack.t.url,
    TIDEMARK_TASK_QUEUE: uniqueQueue('tls-outage'),
    ...tlsEnv('client'),
  };
  const worker = await startWorker(env);
  try {
    await processWindow('2026-05-01T12:00:00Z', env);
    const before = worker.out().length;
    await stopNginx();
    // The worker notices (its polls fail) and keeps running.
    await eventually(
      async () =>
        /tcp connect error|Connection refused/i.test(worker.out().slice(before)) ? true : undefined,
      120_000,
      'the worker to notice the proxy is gone',
    );
    await startNginx();
    await processWindow('2026-05-01T13:00:00Z', env);
    assert.doesNotMatch(worker.out(), /worker stopped/);
  } finally {
    await worker.stop();
  }
});
