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
import { existsSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';

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
export const LIBPQ_ONLY: Record<string, string> = {
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
export type Origin = string;

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

export const ENV_OF = {
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
export function removeParams(u: URL, names: readonly string[]): void {
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

export function redactUrl(url: string): string {
  try {
    return redacted(new URL(url));
  } catch {
    return '(unparseable DATABASE_URL)';
  }
}
