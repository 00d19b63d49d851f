// One reading of a postgres:// URL plus the standard libpq environment (PGSSLMODE, PGSSLROOTCERT,
// PGSSLCERT, PGSSLKEY) for every connection tidemark makes: node-postgres pools and clients, and
// the libpq programs (pg_dump, pg_restore) the backup job runs. Both sides get the SAME resolved
// settings with libpq's semantics:
//
//   disable      never TLS
//   allow        plain first; TLS when the server refuses the plain connection
//   prefer       TLS when the server offers it, else plain (libpq's default, and ours)
//   require      TLS, server certificate not checked (checked against sslrootcert as in
//                verify-ca when a root certificate is given, as libpq does)
//   verify-ca    TLS, server certificate signed by sslrootcert's CA
//   verify-full  verify-ca and the host name matches the certificate
//
// node-postgres (pg-connection-string 2.x) reads `sslmode=require` as verify-full unless the URL
// says `uselibpqcompat=true`; we never hand it the TLS parameters: they are stripped from the
// connection string and the `ssl` options are built here, so `require` means what it means to
// psql and pg_dump. Like libpq, TLS is never used over a unix socket, and a URL parameter wins
// over its environment variable, which wins over the ~/.postgresql default files.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { isIP } from 'node:net';
import { checkServerIdentity, type ConnectionOptions, type PeerCertificate } from 'node:tls';
import pg from 'pg';

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

/** URL query parameters that are TLS settings (taken out of the connection string pg and libpq see). */
const TLS_PARAMS = ['sslmode', 'sslrootcert', 'sslcert', 'sslkey'] as const;
/** node-postgres-only or unsupported parameters, refused with a hint. */
const REFUSED_PARAMS: Record<string, string> = {
  ssl: 'ssl=... is a node-postgres parameter that pg_dump/pg_restore (libpq) refuse; use sslmode=verify-full (with sslrootcert=<CA file>) or sslmode=require instead',
  uselibpqcompat:
    'uselibpqcompat is not needed: tidemark always gives sslmode its libpq meaning; remove the parameter',
  sslpassword:
    'sslpassword (an encrypted client key) is not supported: libpq has no environment variable for it and a command line would show it to every user of the host; use an unencrypted key file readable only by the worker (chmod 600)',
  sslnegotiation: 'sslnegotiation is not supported (the installed pg_dump predates it); remove the parameter',
  dbname:
    'dbname= in the query is read by pg_dump (libpq) but not by node-postgres, and the sibling databases (demo CRM, restore check) are named from the path: give the database in the path, postgres://host/<database>',
  passfile:
    'passfile= is read by pg_dump (libpq) only; set PGPASSFILE (both read it) or give the password in the URL or PGPASSWORD',
  service:
    'service (pg_service.conf) is read by pg_dump (libpq) only, and its settings outrank the URL-derived PGSSL* ones there; put host, port, dbname and the ssl* parameters in the database URL instead',
};
/**
 * libpq TLS settings node-postgres does not implement: pg_dump would apply them and the worker's own
 * connections would not (a revoked server certificate accepted by one side only, say). Refused
 * rather than applied on one side; the URL parameter and its environment variable alike.
 */
const ONE_SIDED: Record<string, string> = {
  sslcrl: 'PGSSLCRL',
  sslcrldir: 'PGSSLCRLDIR',
  sslsni: 'PGSSLSNI',
  ssl_min_protocol_version: 'PGSSLMINPROTOCOLVERSION',
  ssl_max_protocol_version: 'PGSSLMAXPROTOCOLVERSION',
  sslcertmode: 'PGSSLCERTMODE',
  // SCRAM channel binding (node-postgres has it only as a client option tidemark does not set).
  channel_binding: 'PGCHANNELBINDING',
};
/**
 * Other libpq connection settings node-postgres ignores: in the URL they are refused (pg_dump would
 * connect elsewhere or otherwise than the worker); from the environment they are kept from pg_dump.
 */
const LIBPQ_ONLY: Record<string, string> = {
  hostaddr: 'PGHOSTADDR',
  target_session_attrs: 'PGTARGETSESSIONATTRS',
  requirepeer: 'PGREQUIREPEER',
  gssencmode: 'PGGSSENCMODE',
  requiressl: 'PGREQUIRESSL',
};

/**
 * The URI query parameters libpq 15 knows (conninfo keywords); pg_dump stops at any other with
 * "invalid URI query parameter". node-postgres takes more (statement_timeout, query_timeout, ...):
 * one of those would work for the worker and fail the first backup, so it is refused up front.
 */
const LIBPQ_PARAMS = new Set([
  'host',
  'port',
  'user',
  'password',
  'connect_timeout',
  'client_encoding',
  'options',
  'application_name',
  'fallback_application_name',
  'keepalives',
  'keepalives_idle',
  'keepalives_interval',
  'keepalives_count',
  'tcp_user_timeout',
  'replication',
  'sslcompression',
  'krbsrvname',
  'gsslib',
]);

export class PgSettingError extends Error {
  /** The setting at fault: "sslmode", "sslrootcert", ... */
  readonly setting: string;
  constructor(setting: string, message: string) {
    super(message);
    this.name = 'PgSettingError';
    this.setting = setting;
  }
}

/** Where a setting came from, for error messages: "DATABASE_URL parameter sslmode", "PGSSLMODE", ... */
type Origin = string;

export interface PgTls {
  mode: SslMode;
  modeFrom: Origin;
  /** Resolved file paths (absent when not set and no ~/.postgresql default exists). */
  rootCert?: { path: string; from: Origin };
  cert?: { path: string; from: Origin };
  key?: { path: string; from: Origin };
  /** The host is a unix socket directory: libpq never uses TLS there. */
  socket: boolean;
  /** The ~/.postgresql directory looked in for the default files (HOME's; the passwd entry's when HOME is unset or empty, as libpq). */
  defaultsDir: string;
}

export interface PgTarget {
  /** The URL without its TLS parameters (password included: never print it, use redactUrl). */
  url: string;
  tls: PgTls;
}

const ENV_OF = {
  sslmode: 'PGSSLMODE',
  sslrootcert: 'PGSSLROOTCERT',
  sslcert: 'PGSSLCERT',
  sslkey: 'PGSSLKEY',
} as const;
const DEFAULT_FILE = {
  sslrootcert: 'root.crt',
  sslcert: 'postgresql.crt',
  sslkey: 'postgresql.key',
} as const;

/** Query parameters that hold secrets: masked when a URL is printed, never on a command line. */
const SECRET_PARAMS = ['password', 'sslpassword'];

function redacted(u: URL): string {
  const c = new URL(u.toString());
  if (c.password) c.password = '***';
  if (SECRET_PARAMS.some((p) => c.searchParams.has(p)))
    c.search = rawParams(c)
      .map((pair) => (SECRET_PARAMS.includes(paramName(pair)) ? `${pair.split('=')[0]}=***` : pair))
      .join('&');
  return c.toString();
}

/** The query's key=value pairs as written (percent-encoding kept: libpq decodes %XX but not '+'). */
function rawParams(u: URL): string[] {
  return u.search
    .slice(1)
    .split('&')
    .filter((pair) => pair !== '');
}

function paramName(pair: string): string {
  const raw = pair.split('=')[0]!;
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/**
 * Removes parameters from the URL's query, leaving the others byte for byte. URLSearchParams would
 * re-encode them as a form (a space as '+'), which libpq reads as a literal '+': options=-c%20x=y
 * would reach pg_dump as "-c+x=y".
 */
function removeParams(u: URL, names: readonly string[]): void {
  const kept = rawParams(u).filter((pair) => !names.includes(paramName(pair)));
  u.search = kept.length ? `?${kept.join('&')}` : '';
}

/** Resolves a postgres:// URL and the PG* environment into one set of connection settings. */
export function resolvePg(url: string, env: NodeJS.ProcessEnv = process.env): PgTarget {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new PgSettingError(
      'DATABASE_URL',
      'the database URL is not a URL: give postgres://user@host:5432/database (the value is not repeated here: it may hold a password)',
    );
  }
  for (const [param, hint] of Object.entries(REFUSED_PARAMS)) {
    if (u.searchParams.has(param))
      throw new PgSettingError(param, `database URL ${redacted(u)}: parameter ${param} is refused: ${hint}`);
  }
  // socket:/dir?db=... is node-postgres's own form (libpq takes postgres:// only): its parameters are pg's.
  for (const param of u.protocol === 'socket:' ? [] : new Set(u.searchParams.keys())) {
    if (param in LIBPQ_ONLY)
      throw new PgSettingError(
        param,
        `database URL ${redacted(u)}: parameter ${param} is applied by pg_dump/pg_restore (libpq) but not by node-postgres, so the two would connect differently; remove it`,
      );
    if (LIBPQ_PARAMS.has(param) || param in ENV_OF || param in ONE_SIDED || param === 'sslpassword') continue;
    throw new PgSettingError(
      param,
      `database URL ${redacted(u)}: parameter ${param} is not a libpq connection parameter, so pg_dump/pg_restore would refuse the URL ("invalid URI query parameter"); remove it` +
        (/timeout/.test(param) ? ` (a server setting goes in options: options=-c%20${param}%3D<value>)` : ''),
    );
  }
  for (const [param, variable] of Object.entries(ONE_SIDED)) {
    const from = u.searchParams.has(param)
      ? `the database URL's ${param}`
      : env[variable]
        ? variable
        : undefined;
    if (from)
      throw new PgSettingError(
        param,
        `${from} is set, but ${param} is not supported: pg_dump (libpq) would apply it and the worker's node-postgres connections would not, so the two would differ. Remove it (${variable} from the environment, ${param} from the database URL ${redacted(u)})`,
      );
  }
  const pick = (param: keyof typeof ENV_OF): { value: string; from: Origin } | undefined => {
    const fromUrl = u.searchParams.get(param);
    if (fromUrl !== null && fromUrl !== '') return { value: fromUrl, from: `the database URL's ${param}` };
    const fromEnv = env[ENV_OF[param]];
    if (fromEnv) return { value: fromEnv, from: ENV_OF[param] };
    return undefined;
  };
  const host = u.searchParams.get('host') ?? decodeURIComponent(u.hostname);
  // socket:/dir?db=... is node-postgres's unix socket URL form.
  const socket = host.startsWith('/') || (u.protocol === 'socket:' && !u.searchParams.has('host'));
  const modeSetting = pick('sslmode');
  const mode = (modeSetting?.value ?? 'prefer') as SslMode;
  if (!SSL_MODES.includes(mode))
    throw new PgSettingError(
      'sslmode',
      `${modeSetting!.from} is "${modeSetting!.value}": sslmode must be one of ${SSL_MODES.join(', ')}` +
        (modeSetting!.value === 'no-verify' ? ' (no-verify is node-postgres only: use require)' : ''),
    );
  // libpq: HOME, or the passwd entry's home when HOME is unset or empty (join('', ...) would look
  // in the working directory).
  const home = env.HOME || userInfo().homedir;
  const tls: PgTls = {
    mode,
    modeFrom: modeSetting?.from ?? 'the default (no sslmode, no PGSSLMODE)',
    socket,
    defaultsDir: join(home, '.postgresql'),
  };

  const file = (param: keyof typeof DEFAULT_FILE): { path: string; from: Origin } | undefined => {
    const set = pick(param);
    if (set) {
      if (!existsSync(set.value))
        throw new PgSettingError(
          param,
          `${set.from} names ${set.value}, which does not exist: give the path of the ${describeFile(param)} (readable by this process) or remove the setting`,
        );
      return { path: set.value, from: set.from };
    }
    // libpq's default location; used only when the file is there, as libpq does.
    const dflt = join(home, '.postgresql', DEFAULT_FILE[param]);
    return existsSync(dflt) ? { path: dflt, from: `the default ${dflt}` } : undefined;
  };
  if (mode !== 'disable' && !socket) {
    tls.rootCert = file('sslrootcert');
    tls.cert = file('sslcert');
    tls.key = file('sslkey');
    if ((mode === 'verify-ca' || mode === 'verify-full') && !tls.rootCert)
      throw new PgSettingError(
        'sslrootcert',
        `sslmode=${mode} (${tls.modeFrom}) checks the server's certificate against a CA, but no sslrootcert is set and ${join(home, '.postgresql', 'root.crt')} does not exist: add sslrootcert=<path of the CA certificate> to the database URL or set PGSSLROOTCERT`,
      );
    if (tls.cert && !tls.key)
      throw new PgSettingError(
        'sslkey',
        `a client certificate is set (${tls.cert.from}: ${tls.cert.path}) but no key: add sslkey=<path of its private key> to the database URL or set PGSSLKEY`,
      );
    if (tls.key) checkKeyMode(tls.key);
  }
  removeParams(u, TLS_PARAMS);
  return { url: u.toString(), tls };
}

function describeFile(param: 'sslrootcert' | 'sslcert' | 'sslkey'): string {
  return param === 'sslrootcert'
    ? "CA certificate (PEM) that signed the server's certificate"
    : param === 'sslcert'
      ? 'client certificate (PEM)'
      : "client certificate's private key (PEM)";
}

/** libpq refuses a key file others can read; say so before pg_dump does, for node connections too. */
function checkKeyMode(key: { path: string; from: Origin }): void {
  const st = statSync(key.path);
  // libpq (fe-secure-openssl.c): owned by root, no group write/execute and nothing for others;
  // else nothing for group and others. The owner's own bits are not checked (0700 passes).
  const limit = st.uid === 0 ? 0o740 : 0o700;
  if ((st.mode & 0o777 & ~limit) !== 0)
    throw new PgSettingError(
      'sslkey',
      `the private key file ${key.path} (${key.from}) has permissions ${(st.mode & 0o777).toString(8)}; libpq requires ${st.uid === 0 ? '640' : '600'} or less: chmod ${st.uid === 0 ? '640' : '600'} ${key.path}`,
    );
}

/** An IPv6 address in one spelling (0:0:0:0:0:0:0:1 and ::1 alike). */
const canonicalIPv6 = (ip: string): string => new URL(`http://[${ip}]/`).hostname.slice(1, -1);

/**
 * verify-full's check of the server's identity: node's own, but for an IPv6 literal, which is
 * matched against the certificate's IP addresses here. Node.js 24.17 and newer (and 22.23.1)
 * run the host through domainToASCII first, which turns '::1' into '', so an IPv6 host never
 * matched an IP SAN (nodejs/node#64144) and verify-full to [::1] failed. A zone id (fe80::1%eth0)
 * names an interface, which no certificate holds: refused, as libpq refuses it.
 */
export function serverIdentity(host: string, cert: PeerCertificate): Error | undefined {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  if (!bare.includes(':')) return checkServerIdentity(bare, cert);
  const ips = (cert.subjectaltname ?? '')
    .split(', ')
    .filter((name) => name.startsWith('IP Address:'))
    .map((name) => name.slice('IP Address:'.length))
    .filter((ip) => isIP(ip) !== 0)
    .map((ip) => (isIP(ip) === 6 ? canonicalIPv6(ip) : ip));
  if (isIP(bare) === 6 && !bare.includes('%') && ips.includes(canonicalIPv6(bare))) return undefined;
  const reason = `IP: ${bare} is not in the cert's list: ${ips.join(', ')}`;
  return Object.assign(new Error(`Hostname/IP does not match certificate's altnames: ${reason}`), {
    code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    reason,
    host: bare,
    cert,
  });
}

/** node TLS options for one attempt with TLS; `false` for a plain attempt. */
function tlsOptions(target: PgTarget): ConnectionOptions {
  const t = target.tls;
  const read = (f: { path: string; from: Origin }, param: string): string => {
    try {
      return readFileSync(f.path, 'utf8');
    } catch (err) {
      throw new PgSettingError(
        param,
        `${f.from} names ${f.path}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): make it readable by this process`,
      );
    }
  };
  const opts: ConnectionOptions = {};
  if (t.cert && t.key) {
    opts.cert = read(t.cert, 'sslcert');
    opts.key = read(t.key, 'sslkey');
  }
  if (t.rootCert) {
    opts.ca = read(t.rootCert, 'sslrootcert');
    opts.rejectUnauthorized = true;
    // verify-ca, and require/prefer/allow with a root certificate: the chain, not the name.
    opts.checkServerIdentity = t.mode === 'verify-full' ? serverIdentity : () => undefined;
  } else {
    opts.rejectUnauthorized = false;
  }
  // verify-full: the host is checked (pg sets servername for names; an IP against the IP SANs).
  return opts;
}

/** The attempts libpq makes, in order: TLS options or false (plain). */
export function attempts(target: PgTarget): (ConnectionOptions | false)[] {
  const t = target.tls;
  if (t.mode === 'disable' || t.socket) return [false];
  const secure = tlsOptions(target);
  if (t.mode === 'allow') return [false, secure];
  if (t.mode === 'prefer') return [secure, false];
  return [secure];
}

/** libpq's environment for pg_dump/pg_restore: the password (the URL's, else PGPASSWORD) and the resolved TLS settings. */
export function libpqConnection(
  url: string,
  env: NodeJS.ProcessEnv = process.env,
): { args: string[]; env: NodeJS.ProcessEnv } {
  const target = resolvePg(url, env);
  const u = new URL(target.url);
  // A password=... query parameter wins over the user info's, as in libpq and node-postgres; both
  // go through the environment: a command line is visible to every user of the host.
  const password = u.searchParams.get('password') ?? decodeURIComponent(u.password);
  u.password = '';
  removeParams(u, ['password']);
  const child: NodeJS.ProcessEnv = { ...env };
  // A service (PGSERVICE, pg_service.conf) outranks the PG* variables in libpq: its sslmode=disable
  // would beat the PGSSLMODE=verify-full set here. node-postgres has no services: neither side uses one.
  for (const name of [
    ...Object.values(ENV_OF),
    'PGPASSWORD',
    'PGSSLCRL',
    'PGSSLCRLDIR',
    'PGSERVICE',
    'PGSERVICEFILE',
    ...Object.values(LIBPQ_ONLY),
  ])
    delete child[name];
  const t = target.tls;
  child.PGSSLMODE = t.mode;
  // Explicit paths, so libpq uses exactly the files node-postgres reads.
  if (t.rootCert) child.PGSSLROOTCERT = t.rootCert.path;
  if (t.cert) child.PGSSLCERT = t.cert.path;
  if (t.key) child.PGSSLKEY = t.key.path;
  // The URL's password, else PGPASSWORD as node-postgres reads it (pg's defaults take PGPASSWORD too).
  if (password) child.PGPASSWORD = password;
  else if (env.PGPASSWORD) child.PGPASSWORD = env.PGPASSWORD;
  return { args: [`--dbname=${u.toString()}`], env: child };
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
const CERT_CODES = /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ALTNAME|HOSTNAME|ISSUER/;

/** A connect error with the TLS setting that explains it, or the error itself. */
export function explainConnectError(err: unknown, target: PgTarget, usedTls: boolean): unknown {
  const e = err as Error & { code?: string };
  if (!e || typeof e !== 'object' || typeof e.message !== 'string') return err;
  const t = target.tls;
  const where = redactUrl(target.url);
  const mode = `sslmode=${t.mode} (${t.modeFrom})`;
  let message: string | undefined;
  if (e.code === '28000' && /no encryption/i.test(e.message)) {
    message = `PostgreSQL at ${where} refuses connections without TLS (${e.message}), and ${mode} did not use TLS: set sslmode=verify-full&sslrootcert=<CA file> in the database URL (or PGSSLMODE/PGSSLROOTCERT)`;
  } else if (e.code === '28000' && /certificate/i.test(e.message)) {
    message = `PostgreSQL at ${where} requires a client certificate (${e.message}): set sslcert=<certificate>&sslkey=<key> in the database URL (or PGSSLCERT/PGSSLKEY)${t.cert ? `; the one given (${t.cert.path}, ${t.cert.from}) was not accepted for this user` : ''}`;
  } else if (/does not support SSL/i.test(e.message)) {
    message = `PostgreSQL at ${where} does not offer TLS, but ${mode} requires it: turn ssl on at the server, or (only on a trusted network) set sslmode=prefer or disable`;
  } else if (
    usedTls &&
    ((e.code && CERT_CODES.test(e.code)) || /Hostname\/IP does not match/i.test(e.message))
  ) {
    message =
      `the server certificate of PostgreSQL at ${where} failed verification under ${mode}` +
      `${t.rootCert ? ` with sslrootcert=${t.rootCert.path} (${t.rootCert.from})` : ' with no sslrootcert'}: ${e.message}. ` +
      (t.mode === 'verify-full'
        ? "Give the CA that signed the server's certificate in sslrootcert, and connect by a host name the certificate lists"
        : "Give the CA that signed the server's certificate in sslrootcert");
  }
  if (!message) return err;
  const out = new Error(message, { cause: err }) as Error & { code?: string; setting?: string };
  out.name = 'PgTlsError';
  if (e.code) out.code = e.code;
  return out;
}

export function redactUrl(url: string): string {
  try {
    return redacted(new URL(url));
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}

function fallbackAllowed(err: unknown): boolean {
  const code = (err as { code?: string }).code;
  return !(code && NETWORK_CODES.has(code));
}

const TARGET = Symbol('tidemark.pgTarget');
type TargetConfig = pg.ClientConfig & { [TARGET]?: PgTarget };

/**
 * A pg.Client that makes libpq's attempts (allow: plain then TLS; prefer: TLS then plain) and
 * explains TLS failures. Pools create it through their `Client` option.
 */
export class TidemarkPgClient extends pg.Client {
  // Holds the connection string (with its password): non-enumerable, as pg hides its own copy.
  declare private readonly base: TargetConfig;
  private tlsInUse: boolean;
  /** prefer's TLS request was answered "no TLS" and the startup went on in plain on that connection. */
  private tlsRefused = false;
  /** A TLS file that could not be read when this client was made: connect() fails with it. */
  private unreadable: unknown;
  constructor(config: TargetConfig) {
    const target = config[TARGET];
    if (!target) throw new Error('TidemarkPgClient needs a config from pgClientConfig (db/pg-connection.ts)');
    // The files are read for every new client (a rotated certificate is picked up, as libpq does).
    // One that cannot be read any more fails connect(), never the constructor: pg-pool makes
    // clients inside a released client's 'end' callback, where a throw kills the process.
    let plan: (ConnectionOptions | false)[];
    let unreadable: unknown;
    try {
      plan = attempts(target);
    } catch (err) {
      unreadable = err;
      plan = [false];
    }
    const first = plan[0]!;
    super({ ...config, ssl: first });
    Object.defineProperty(this, 'base', { value: config, enumerable: false });
    this.unreadable = unreadable;
    this.tlsInUse = first !== false;
    if (first !== false && plan[1] === false) this.plainOnRefusal();
  }

  /**
   * prefer on a server that answers the TLS request with "N": libpq sends its plain startup on the
   * same connection (no second connection, no second backend forked by the server). node-postgres
   * would close it with "The server does not support SSL connections"; intercept that one answer.
   * Tied to pg 8.23.1's Connection.connect, which waits for the answer with stream.once('data').
   */
  private plainOnRefusal(): void {
    type Con = {
      stream: NodeJS.EventEmitter;
      ssl: unknown;
      connect(port: unknown, host?: unknown): unknown;
      attachListeners(stream: unknown): void;
      emit(event: string): boolean;
    };
    const con = (this as unknown as { connection: Con }).connection;
    const connect = con.connect;
    con.connect = (port, host) => {
      const stream = con.stream;
      const once = stream.once;
      const patched = (event: string | symbol, listener: (...a: unknown[]) => void): NodeJS.EventEmitter => {
        if (event !== 'data') return once.call(stream, event, listener);
        stream.once = once;
        return once.call(stream, 'data', (answer: Buffer) => {
          if (answer.length === 1 && answer[0] === 0x4e /* 'N' */) {
            this.tlsInUse = false;
            this.tlsRefused = true;
            con.ssl = false;
            con.attachListeners(stream);
            con.emit('sslconnect'); // the client sends its startup message
            return;
          }
          listener(answer);
        });
      };
      stream.once = patched as typeof stream.once;
      return connect.call(con, port, host);
    };
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error | null, c?: pg.Client) => void): void;
  override connect(callback?: (err: Error | null, c?: pg.Client) => void): Promise<pg.Client> | void {
    const p = this.connectAttempts().then(() => this as pg.Client);
    if (!callback) return p;
    p.then(
      (c) => callback(null, c),
      (err: Error) => callback(err),
    );
  }

  private async connectAttempts(): Promise<void> {
    if (this.unreadable) throw this.unreadable;
    const target = this.base[TARGET]!;
    const plan = attempts(target);
    let first: unknown;
    try {
      await super.connect();
      return;
    } catch (err) {
      // After an "N" answer the plain attempt has been made already (libpq makes no other).
      if (plan.length < 2 || this.tlsRefused || !fallbackAllowed(err))
        throw explainConnectError(err, target, this.tlsInUse);
      first = err;
    }
    const firstUsedTls = this.tlsInUse;
    // libpq's second attempt on a new connection: take over a fresh client's state, keeping our
    // event listeners (the pool's). The first connection's late events ('end' once its socket
    // closes) must not reach the second attempt's state.
    const old = (this as unknown as { connection: pg.Connection & { stream?: { destroy(): void } } })
      .connection;
    old.removeAllListeners();
    old.on('error', () => undefined);
    old.stream?.destroy();
    const fresh = new pg.Client({ ...this.base, ssl: plan[1]! });
    // Queries issued before connect() resolved wait in the queue for the connection that succeeds.
    const queued = (this as unknown as { _queryQueue: unknown[] })._queryQueue;
    for (const key of Reflect.ownKeys(fresh)) {
      if (typeof key === 'symbol' || key.startsWith('_events') || key === '_maxListeners') continue;
      Object.defineProperty(this, key, Object.getOwnPropertyDescriptor(fresh, key)!);
    }
    (this as unknown as { _queryQueue: unknown[] })._queryQueue.push(...queued);
    this.tlsInUse = plan[1] !== false;
    try {
      await super.connect();
    } catch (err) {
      // allow's TLS attempt on a server without TLS says nothing new: the plain attempt's answer
      // (a missing database, say, which ensureDatabase acts on) is the one that counts.
      if (/does not support SSL/i.test((err as Error).message))
        throw explainConnectError(first, target, firstUsedTls);
      // prefer on a server that takes TLS only: the plain retry's "no encryption" says nothing new
      // either; the TLS attempt's answer (a missing database, a wrong password, a certificate that
      // failed verification) is the one to act on.
      const e = err as { code?: string; message?: string };
      if (firstUsedTls && e.code === '28000' && /no encryption/i.test(e.message ?? ''))
        throw explainConnectError(first, target, firstUsedTls);
      throw explainConnectError(err, target, this.tlsInUse);
    }
  }
}

/** node-postgres config for a URL: connection string without TLS parameters, TLS from the resolved settings. */
export function pgClientConfig(
  url: string,
  extra: Omit<pg.ClientConfig, 'connectionString' | 'ssl'> = {},
): TargetConfig {
  const target = resolvePg(url);
  // Read the files now, so a missing or unreadable one fails here with the setting's name.
  attempts(target);
  return { ...extra, connectionString: target.url, [TARGET]: target };
}

/** A client for a URL (connect() as usual). */
export function pgClient(
  url: string,
  extra: Omit<pg.ClientConfig, 'connectionString' | 'ssl'> = {},
): pg.Client {
  return new TidemarkPgClient(pgClientConfig(url, extra));
}

/** A pool for a URL whose clients connect with the resolved TLS settings. */
export function pgPool(
  url: string,
  extra: Omit<pg.PoolConfig, 'connectionString' | 'ssl' | 'Client'> = {},
): pg.Pool {
  return new pg.Pool({
    ...pgClientConfig(url, extra),
    Client: TidemarkPgClient as unknown as typeof pg.Client,
  } as pg.PoolConfig);
}
