// The one mapping of a postgres:// URL + PGSSL* environment to node-postgres options and to the
// libpq environment of pg_dump/pg_restore: the same sslmode, files and precedence on both sides.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PeerCertificate } from 'node:tls';
import { after, test } from 'node:test';
import { inspect } from 'node:util';
import {
  attempts,
  libpqConnection,
  pgClient,
  PgSettingError,
  redactUrl,
  resolvePg,
  serverIdentity,
} from '../../db/pg-connection.js';
import { sibling } from '../../jobs/catalog.js';
import { redactor } from '../../workers/channels.js';
import { secretsOf, type Config } from '../../config/env.js';

const dir = mkdtempSync(join(tmpdir(), 'tidemark-pgtls-unit-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, mode = 0o600) => {
  const p = join(dir, name);
  writeFileSync(p, `-----BEGIN ${name}-----\n`);
  chmodSync(p, mode);
  return p;
};
const ca = file('ca.crt', 0o644);
const otherCa = file('other-ca.crt', 0o644);
const cert = file('client.crt', 0o644);
const key = file('client.key');
// An empty HOME: no ~/.postgresql defaults unless a test makes them.
const emptyHome = mkdtempSync(join(dir, 'home-'));
const env = (extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv => ({ HOME: emptyHome, ...extra });

test('no sslmode anywhere: prefer (libpq default) - TLS without verification first, then plain', () => {
  const t = resolvePg('postgres://u:secret@db.example:5432/app', env());
  assert.equal(t.tls.mode, 'prefer');
  const a = attempts(t);
  assert.equal(a.length, 2);
  assert.deepEqual(a[0], { rejectUnauthorized: false });
  assert.equal(a[1], false);
  const l = libpqConnection('postgres://u:secret@db.example:5432/app', env());
  assert.equal(l.env.PGSSLMODE, 'prefer');
  assert.equal(l.env.PGPASSWORD, 'secret');
  assert.deepEqual(l.args, ['--dbname=postgres://u@db.example:5432/app']);
});

test('each sslmode maps to the same attempts in node-postgres and the same PGSSLMODE for libpq', () => {
  const url = (q: string) => `postgres://u@db.example/app?${q}`;
  assert.deepEqual(attempts(resolvePg(url('sslmode=disable'), env())), [false]);
  assert.deepEqual(attempts(resolvePg(url('sslmode=allow'), env())), [false, { rejectUnauthorized: false }]);
  // require without a root certificate: encrypted, not verified (NOT node-postgres's verify-full reading).
  assert.deepEqual(attempts(resolvePg(url('sslmode=require'), env())), [{ rejectUnauthorized: false }]);
  // require with a root certificate behaves as verify-ca (libpq): chain checked, name not.
  const req = attempts(resolvePg(url(`sslmode=require&sslrootcert=${ca}`), env()))[0] as Record<
    string,
    unknown
  >;
  assert.equal(req.rejectUnauthorized, true);
  assert.match(String(req.ca), /BEGIN ca.crt/);
  assert.equal(typeof req.checkServerIdentity, 'function');
  const vca = attempts(resolvePg(url(`sslmode=verify-ca&sslrootcert=${ca}`), env()))[0] as Record<
    string,
    unknown
  >;
  assert.equal(vca.rejectUnauthorized, true);
  assert.equal(typeof vca.checkServerIdentity, 'function');
  const vfull = attempts(resolvePg(url(`sslmode=verify-full&sslrootcert=${ca}`), env()))[0] as Record<
    string,
    unknown
  >;
  assert.equal(vfull.rejectUnauthorized, true);
  assert.equal(vfull.checkServerIdentity, serverIdentity, 'verify-full checks the host name (or IP)');
  for (const mode of ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full']) {
    const q = mode.startsWith('verify') ? `sslmode=${mode}&sslrootcert=${ca}` : `sslmode=${mode}`;
    const l = libpqConnection(url(q), env());
    assert.equal(l.env.PGSSLMODE, mode);
    assert.doesNotMatch(l.args[0]!, /ssl/, 'TLS settings reach libpq through PGSSL* only');
  }
});

test('the URL wins over PGSSL* variables, which win over defaults; the files reach libpq as explicit paths', () => {
  const e = env({ PGSSLMODE: 'verify-ca', PGSSLROOTCERT: otherCa, PGSSLCERT: cert, PGSSLKEY: key });
  const fromEnv = resolvePg('postgres://u@h/app', e);
  assert.equal(fromEnv.tls.mode, 'verify-ca');
  assert.equal(fromEnv.tls.modeFrom, 'PGSSLMODE');
  assert.equal(fromEnv.tls.rootCert?.path, otherCa);
  const l = libpqConnection('postgres://u@h/app', e);
  assert.deepEqual(
    [l.env.PGSSLMODE, l.env.PGSSLROOTCERT, l.env.PGSSLCERT, l.env.PGSSLKEY],
    ['verify-ca', otherCa, cert, key],
  );
  const both = resolvePg(`postgres://u@h/app?sslmode=verify-full&sslrootcert=${ca}`, e);
  assert.equal(both.tls.mode, 'verify-full');
  assert.equal(both.tls.rootCert?.path, ca);
  assert.equal(both.tls.cert?.path, cert, 'unset in the URL: the environment variable still applies');
  assert.equal(both.url, 'postgres://u@h/app', 'the TLS parameters leave the connection string');
  const lb = libpqConnection(
    `postgres://u@h/app?sslmode=verify-full&sslrootcert=${ca}&application_name=x`,
    e,
  );
  assert.equal(lb.env.PGSSLROOTCERT, ca);
  assert.deepEqual(lb.args, ['--dbname=postgres://u@h/app?application_name=x']);
  // An inherited PGSSLMODE never reaches pg_dump unresolved: disable in the URL is disable for libpq.
  assert.equal(libpqConnection('postgres://u@h/app?sslmode=disable', e).env.PGSSLMODE, 'disable');
  assert.equal(libpqConnection('postgres://u@h/app?sslmode=disable', e).env.PGSSLROOTCERT, undefined);
});

test('~/.postgresql/root.crt is used when present, as libpq does (require then verifies the chain)', () => {
  const home = mkdtempSync(join(dir, 'home-'));
  const pgdir = join(home, '.postgresql');
  mkdirSync(pgdir);
  writeFileSync(join(pgdir, 'root.crt'), '-----BEGIN default-----\n');
  const t = resolvePg('postgres://u@h/app?sslmode=require', { HOME: home });
  assert.equal(t.tls.rootCert?.path, join(pgdir, 'root.crt'));
  assert.equal((attempts(t)[0] as { rejectUnauthorized: boolean }).rejectUnauthorized, true);
  assert.equal(
    libpqConnection('postgres://u@h/app?sslmode=require', { HOME: home }).env.PGSSLROOTCERT,
    join(pgdir, 'root.crt'),
  );
});

test('a unix socket host never uses TLS (libpq ignores sslmode there)', () => {
  assert.deepEqual(attempts(resolvePg('postgres://u@%2Fvar%2Frun%2Fpostgresql/app?sslmode=prefer', env())), [
    false,
  ]);
  assert.deepEqual(attempts(resolvePg('postgres://u@localhost/app?host=/tmp&sslmode=require', env())), [
    false,
  ]);
});

function refused(fn: () => unknown, setting: string, message: RegExp) {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof PgSettingError, String(err));
    assert.equal(err.setting, setting);
    assert.match(err.message, message);
    assert.doesNotMatch(err.message, /secret/, 'the password is never printed');
    return true;
  });
}

test('bad settings are refused naming the setting, its origin and the fix; never the password', () => {
  const base = 'postgres://u:secret@h/app';
  refused(
    () => resolvePg(`${base}?sslmode=verify-full&sslrootcert=/nope/ca.crt`, env()),
    'sslrootcert',
    /the database URL's sslrootcert names \/nope\/ca\.crt, which does not exist/,
  );
  refused(
    () =>
      resolvePg(
        base,
        env({ PGSSLMODE: 'verify-full', PGSSLROOTCERT: ca, PGSSLCERT: '/nope/c.crt', PGSSLKEY: key }),
      ),
    'sslcert',
    /PGSSLCERT names \/nope\/c\.crt, which does not exist/,
  );
  refused(
    () => resolvePg(`${base}?sslmode=require&sslcert=${cert}&sslkey=/nope/c.key`, env()),
    'sslkey',
    /sslkey names \/nope\/c\.key/,
  );
  refused(
    () => resolvePg(`${base}?sslmode=verify-full`, env()),
    'sslrootcert',
    /sslmode=verify-full .*no sslrootcert/,
  );
  refused(
    () => resolvePg(`${base}?sslmode=no-verify`, env()),
    'sslmode',
    /must be one of disable, allow, prefer.*use require/,
  );
  refused(() => resolvePg(base, env({ PGSSLMODE: 'strict' })), 'sslmode', /PGSSLMODE is "strict"/);
  refused(() => resolvePg(`${base}?ssl=true`, env()), 'ssl', /use sslmode=verify-full/);
  refused(() => resolvePg(`${base}?sslmode=require&uselibpqcompat=true`, env()), 'uselibpqcompat', /remove/);
  refused(() => resolvePg(`${base}?sslpassword=pw`, env()), 'sslpassword', /unencrypted key file/);
  refused(() => resolvePg(`${base}?sslmode=require&sslcert=${cert}`, env()), 'sslkey', /no key/);
  const open = file('open.key', 0o644);
  refused(
    () => resolvePg(`${base}?sslmode=require&sslcert=${cert}&sslkey=${open}`, env()),
    'sslkey',
    new RegExp(`permissions 644; libpq requires 6[04]0 or less: chmod 6[04]0 ${open}`),
  );
});

test("sibling databases (demo CRM, restore-check scratch) keep DATABASE_URL's TLS parameters", () => {
  const url = `postgres://u:pw@db.example:5432/tidemark?sslmode=verify-full&sslrootcert=${ca}&sslcert=${cert}&sslkey=${key}`;
  const s = new URL(sibling(url, '_restore_check'));
  assert.equal(s.pathname, '/tidemark_restore_check');
  assert.equal(s.password, 'pw');
  assert.deepEqual(
    [...s.searchParams.entries()],
    [
      ['sslmode', 'verify-full'],
      ['sslrootcert', ca],
      ['sslcert', cert],
      ['sslkey', key],
    ],
  );
});

test('a client made for a URL shows neither the password nor the key when printed', () => {
  const c = pgClient(`postgres://u:pw-Zq81x@db.example/app?sslmode=require&sslcert=${cert}&sslkey=${key}`);
  const printed = `${inspect(c, { depth: 6 })} ${JSON.stringify(Object.keys(c))}`;
  assert.match(printed, /BEGIN client\.crt/, 'the printout is of the configured client');
  assert.doesNotMatch(printed, /pw-Zq81x/);
  assert.doesNotMatch(printed, /BEGIN client\.key/);
});

test('a client with two attempts (prefer, allow) shows neither the password nor the key when printed', () => {
  for (const mode of ['prefer', 'allow']) {
    const c = pgClient(`postgres://u:pw-Zq81x@db.example/app?sslmode=${mode}&sslcert=${cert}&sslkey=${key}`);
    const printed = `${inspect(c, { depth: 8 })} ${JSON.stringify(Object.keys(c))}`;
    assert.match(printed, /TidemarkPgClient/, 'the printout is of the client');
    assert.doesNotMatch(printed, /pw-Zq81x/, mode);
    assert.doesNotMatch(printed, /BEGIN client\.key/, mode);
  }
});

test('pg_dump gets the password node-postgres uses: the URL query password, the user info password, else PGPASSWORD', () => {
  assert.equal(
    libpqConnection('postgres://u@h/app', env({ PGPASSWORD: 'from-env' })).env.PGPASSWORD,
    'from-env',
  );
  assert.equal(
    libpqConnection('postgres://u:in-url@h/app', env({ PGPASSWORD: 'from-env' })).env.PGPASSWORD,
    'in-url',
  );
  const q = libpqConnection('postgres://u@h/app?password=in-query&application_name=x', env());
  assert.equal(q.env.PGPASSWORD, 'in-query');
  assert.deepEqual(
    q.args,
    ['--dbname=postgres://u@h/app?application_name=x'],
    'no password on the command line',
  );
});

test('a printed URL or setting error masks password= and sslpassword= query parameters', () => {
  assert.equal(
    redactUrl('postgres://u:a@h/app?password=in-query&x=1'),
    'postgres://u:***@h/app?password=***&x=1',
  );
  refused(
    () => resolvePg('postgres://u@h/app?sslpassword=key-passphrase', env()),
    'sslpassword',
    /sslpassword=\*\*\*: parameter sslpassword is refused/,
  );
  assert.throws(
    () => resolvePg('postgres://u@h/app?sslpassword=key-passphrase', env()),
    (err: Error) => !err.message.includes('key-passphrase'),
  );
});

test('the parameters left in the connection string reach pg_dump byte for byte (%20 stays %20, never +)', () => {
  const url = `postgres://u@h/app?options=-c%20statement_timeout%3D5min&sslmode=require&application_name=my%20app`;
  const expected = 'postgres://u@h/app?options=-c%20statement_timeout%3D5min&application_name=my%20app';
  assert.equal(resolvePg(url, env()).url, expected);
  assert.deepEqual(libpqConnection(url, env()).args, [`--dbname=${expected}`]);
});

test("a key file's owner bits are not checked, as in libpq (0700 passes); group write or any access for others is refused", () => {
  const ownerOnly = file('owner-only.key', 0o700);
  assert.equal(
    resolvePg(`postgres://u@h/app?sslmode=require&sslcert=${cert}&sslkey=${ownerOnly}`, env()).tls.key?.path,
    ownerOnly,
  );
  const groupWritable = file('group-writable.key', 0o660);
  refused(
    () => resolvePg(`postgres://u@h/app?sslmode=require&sslcert=${cert}&sslkey=${groupWritable}`, env()),
    'sslkey',
    /permissions 660; libpq requires 6[04]0 or less/,
  );
});

test("node-postgres's socket:/dir URL form is a unix socket: no TLS there, as libpq", () => {
  assert.deepEqual(attempts(resolvePg('socket:/var/run/postgresql?db=app&sslmode=require', env())), [false]);
});

test('libpq TLS settings node-postgres cannot apply (CRL, protocol versions, SNI) are refused, from the URL and from PG*', () => {
  const base = 'postgres://u:secret@h/app';
  refused(
    () => resolvePg(`${base}?sslmode=verify-full&sslrootcert=${ca}&sslcrl=/x.crl`, env()),
    'sslcrl',
    /the database URL's sslcrl is set, but sslcrl is not supported/,
  );
  refused(() => resolvePg(base, env({ PGSSLCRL: '/x.crl' })), 'sslcrl', /PGSSLCRL is set/);
  refused(() => resolvePg(base, env({ PGSSLCRLDIR: '/crls' })), 'sslcrldir', /PGSSLCRLDIR is set/);
  refused(
    () => resolvePg(`${base}?ssl_min_protocol_version=TLSv1.3`, env()),
    'ssl_min_protocol_version',
    /Remove it/,
  );
  refused(() => resolvePg(`${base}?sslsni=0`, env()), 'sslsni', /pg_dump \(libpq\) would apply it/);
});

test("an empty HOME means the passwd entry's home, as libpq; never ./.postgresql in the working directory", () => {
  const cwd = mkdtempSync(join(dir, 'cwd-'));
  mkdirSync(join(cwd, '.postgresql'));
  writeFileSync(join(cwd, '.postgresql', 'root.crt'), '-----BEGIN stray-----\n');
  const saved = process.cwd();
  process.chdir(cwd);
  try {
    const t = resolvePg('postgres://u@h/app?sslmode=require', { HOME: '' });
    assert.equal(t.tls.defaultsDir, join(userInfo().homedir, '.postgresql'));
    assert.notEqual(t.tls.rootCert?.path, join('.postgresql', 'root.crt'));
  } finally {
    process.chdir(saved);
  }
});

test("a password in DATABASE_URL's query is a secret: redacted from alert and failure texts", () => {
  const url = 'postgres://u@db.example/app?sslmode=require&password=q-secret-7';
  assert.ok(secretsOf({ DATABASE_URL: url } as Config).includes('q-secret-7'));
  const text = `connection to ${url} failed; source postgres://v@other/app?password=other-secret-9&x=1`;
  const out = redactor([])(text);
  assert.doesNotMatch(out, /q-secret-7|other-secret-9/);
  assert.match(out, /\?sslmode=require&password=\*\*\*/);
  assert.match(out, /\?password=\*\*\*&x=1/);
});

test('a service is refused in the URL and not passed on to pg_dump from the environment (libpq ranks it above PGSSLMODE)', () => {
  refused(() => resolvePg('postgres://u:secret@h/app?service=prod', env()), 'service', /pg_service\.conf/);
  const l = libpqConnection(
    'postgres://u@h/app?sslmode=require',
    env({ PGSERVICE: 'x', PGSERVICEFILE: '/f' }),
  );
  assert.equal(l.env.PGSERVICE, undefined);
  assert.equal(l.env.PGSERVICEFILE, undefined);
});

test('a node-postgres-only URL parameter (statement_timeout, ...) is refused: pg_dump would stop at it', () => {
  refused(
    () => resolvePg('postgres://u:secret@h/app?statement_timeout=5000', env()),
    'statement_timeout',
    /not a libpq connection parameter.*options=-c%20statement_timeout%3D<value>/,
  );
  refused(() => resolvePg('postgres://u:secret@h/app?query_timeout=5', env()), 'query_timeout', /remove it/);
  const ok = 'application_name=x&options=-c%20a%3Db&connect_timeout=5&keepalives=1';
  assert.equal(resolvePg(`postgres://u@h/app?${ok}&sslmode=disable`, env()).url, `postgres://u@h/app?${ok}`);
});

test('libpq-only connection settings: refused in the URL, kept from pg_dump when inherited', () => {
  const base = 'postgres://u:secret@h/app';
  refused(() => resolvePg(`${base}?hostaddr=10.9.8.7`, env()), 'hostaddr', /not by node-postgres/);
  refused(
    () => resolvePg(`${base}?target_session_attrs=read-write`, env()),
    'target_session_attrs',
    /remove it/,
  );
  refused(() => resolvePg(`${base}?channel_binding=require`, env()), 'channel_binding', /is not supported/);
  refused(() => resolvePg(base, env({ PGCHANNELBINDING: 'require' })), 'channel_binding', /PGCHANNELBINDING/);
  refused(() => resolvePg(`${base}?dbname=other`, env()), 'dbname', /give the database in the path/);
  refused(() => resolvePg(`${base}?passfile=/p`, env()), 'passfile', /PGPASSFILE/);
  const l = libpqConnection(
    'postgres://u@h/app',
    env({ PGHOSTADDR: '10.9.8.7', PGTARGETSESSIONATTRS: 'read-write' }),
  );
  assert.equal(l.env.PGHOSTADDR, undefined);
  assert.equal(l.env.PGTARGETSESSIONATTRS, undefined);
});

test('verify-full matches an IPv6 literal against the certificate IP addresses (Node.js 24.17+ no longer does)', () => {
  // nodejs/node#64144: tls.checkServerIdentity runs the host through domainToASCII, which makes
  // '::1' empty, so an IPv6 host never matches an IP Address SAN on Node.js 24.17 and newer.
  const cert = {
    subject: { CN: 'db' },
    subjectaltname:
      'DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, IP Address:FD00:0:0:0:0:0:0:A',
  } as unknown as PeerCertificate;
  assert.equal(serverIdentity('::1', cert), undefined);
  assert.equal(serverIdentity('[::1]', cert), undefined);
  assert.equal(serverIdentity('0:0::1', cert), undefined);
  assert.equal(serverIdentity('fd00::a', cert), undefined);
  assert.equal(serverIdentity('127.0.0.1', cert), undefined);
  assert.equal(serverIdentity('localhost', cert), undefined);
  // A zone id names an interface, not an address a certificate can hold: refused, as libpq
  // (pg_dump) refuses it, with an error to catch rather than a throw in the TLS callback.
  for (const wrong of [
    '::2',
    'fd00::b',
    '127.0.0.2',
    'db.example.com',
    '::1%lo',
    'fe80::1%eth0',
    '::ffff:127.0.0.1',
  ]) {
    const err = serverIdentity(wrong, cert);
    assert.ok(err instanceof Error, `${wrong} is refused`);
    assert.equal((err as NodeJS.ErrnoException).code, 'ERR_TLS_CERT_ALTNAME_INVALID');
  }
  // Named as the IP it is, with the certificate's addresses (Node.js 24's own check speaks of
  // a host name and the CN here).
  assert.equal(
    (serverIdentity('::2', cert) as Error & { reason: string }).reason,
    "IP: ::2 is not in the cert's list: 127.0.0.1, ::1, fd00::a",
  );
  const mapped = { subjectaltname: 'IP Address:0:0:0:0:0:FFFF:7F00:1' } as unknown as PeerCertificate;
  assert.equal(
    serverIdentity('::ffff:127.0.0.1', mapped),
    undefined,
    'an IPv4-mapped address in either spelling',
  );
  const verifyFull = attempts(
    resolvePg(`postgres://u@[::1]:5432/db?sslmode=verify-full&sslrootcert=${ca}`, env()),
  )[0];
  assert.ok(verifyFull && verifyFull.checkServerIdentity === serverIdentity, 'verify-full uses it');
});

test("the node-postgres client code uses pg's public API only: no private members, no patched methods", () => {
  // A pg release may rework its private code (Connection.connect, _queryQueue, ...) in any minor
  // version; tidemark's clients must not depend on it.
  const db = join(dirname(fileURLToPath(import.meta.url)), '../../db');
  const files = readdirSync(db).filter((f) => /^pg-.*\.ts$/.test(f));
  assert.ok(files.includes('pg-connection.ts'), `the pg modules are found in ${db}`);
  const forbidden: [RegExp, string][] = [
    [/\._[A-Za-z]\w*/, 'an underscore (private) member'],
    [/\.connection\b/, "pg.Client's connection object"],
    [/Reflect\.ownKeys|getOwnPropertyDescriptor/, "copying another object's own fields"],
    [/\.(once|on|connect|emit)\s*=[^=]/, 'a replaced method'],
    [/attachListeners|sslconnect/, "pg's internal Connection protocol"],
  ];
  for (const f of files) {
    const source = readFileSync(join(db, f), 'utf8');
    for (const [pattern, what] of forbidden) {
      const hit = pattern.exec(source);
      assert.equal(hit, null, `${f} uses ${what}: ${hit?.[0]}`);
    }
  }
});
