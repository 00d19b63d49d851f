// How every process of tidemark reaches Temporal: the one place. The settings are Temporal's own
// (@temporalio/envconfig): TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TEMPORAL_TLS_* and
// TEMPORAL_GRPC_META_* over a TOML profile (TEMPORAL_CONFIG_FILE, else ~/.config/temporalio/temporal.toml;
// TEMPORAL_PROFILE, else "default"). Nothing set: the dev server on 127.0.0.1:TEMPORAL_PORT, plain text,
// namespace "default". An error names the setting that is wrong (the variable, or the file and key) and
// never prints the API key, a key or a certificate.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { accessSync, constants, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { ConnectionOptions } from '@temporalio/client';
import {
  loadClientConfigProfile,
  loadClientConnectConfig,
  type ClientConfigProfile,
  type LoadClientProfileOptions,
} from '@temporalio/envconfig';
import { ConfigError } from '../contract/config-error.js';

/** Where each connection setting came from, and what the connection needs (no secret in it). */
export interface TemporalSettings {
  readonly address: string;
  /** The variable, the profile key, or "TEMPORAL_ADDRESS unset: 127.0.0.1:TEMPORAL_PORT". */
  readonly addressFrom: string;
  /** Set when an environment variable or a profile names the address (unset: the local dev server). */
  readonly addressSet: boolean;
  readonly namespace: string;
  readonly namespaceFrom: string;
  /** The TOML file read, if any, and the profile taken from it. */
  readonly file: string | undefined;
  readonly profile: string;
  readonly tls: 'off' | 'tls' | 'mtls';
  readonly apiKey: boolean;
  /** The settings that name gRPC headers (TEMPORAL_GRPC_META_*, grpc_meta in the profile): names only. */
  readonly metadata: readonly string[];
  /** The certificate and key files the connection reads, each with the setting that names it. */
  readonly files: readonly { readonly setting: string; readonly path: string; readonly what: string }[];
}

// What loadClientConnectConfig is called with (it holds the API key): kept off the settings object,
// so that printing or serialising the settings can never show it.
const loadOptions = new WeakMap<TemporalSettings, LoadClientProfileOptions>();
const secretValues = new WeakMap<TemporalSettings, string[]>();
/** The settings that name the client certificate, its key and the server CA (a path or PEM data). */
const tlsSettings = new WeakMap<TemporalSettings, { cert?: string; key?: string; ca?: string }>();

const DEFAULT_NAMESPACE = 'default';
/** What a gRPC header value may hold (printable ASCII), with nothing blank around it. */
const HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
/** envconfig's header name for TEMPORAL_GRPC_META_<NAME> (lower case, its first "_" made "-"). */
const grpcMetaHeader = (name: string): string => name.toLocaleLowerCase().replace('_', '-');
const BOOLEAN_VARIABLES = ['TEMPORAL_TLS', 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION'] as const;

/**
 * envconfig reads every value but "1" and "true" as false, so TEMPORAL_TLS=TRUE turned TLS off (and an
 * API key went out in plain text). Read as the Temporal CLI does (true/false/1/0, any case); refuse the rest.
 */
function normaliseBooleans(vars: Record<string, string>): void {
  for (const name of BOOLEAN_VARIABLES) {
    const value = vars[name];
    if (value === undefined) continue;
    if (/^(1|true)$/i.test(value)) vars[name] = 'true';
    else if (/^(0|false)$/i.test(value)) vars[name] = 'false';
    else
      throw new ConfigError(
        name,
        `"${value.slice(0, 20)}" is not a boolean: set it to true or false (1 or 0), or unset it`,
      );
  }
}
const LOOPBACK = /^(127\.\d+\.\d+\.\d+|localhost|\[::1\]):\d+$/i;
const HOST_PORT = /^[^\s:/]+:\d+$|^\[[0-9a-fA-F:.]+\]:\d+$/;

/** The environment as envconfig should see it: an empty variable is an unset one, as everywhere else here. */
function effectiveEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter(
      (e): e is [string, string] =>
        typeof e[1] === 'string' && (e[1] !== '' || e[0].startsWith('TEMPORAL_GRPC_META_')),
    ),
  );
}

function defaultConfigFile(env: Record<string, string>): string | undefined {
  const xdg = env.XDG_CONFIG_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'temporalio', 'temporal.toml');
  return env.HOME ? join(env.HOME, '.config', 'temporalio', 'temporal.toml') : undefined;
}

/** The TOML file's path and text: TEMPORAL_CONFIG_FILE must name one that can be read; the default may be absent. */
function readConfigFile(env: Record<string, string>): { path: string; text: string } | undefined {
  const named = env.TEMPORAL_CONFIG_FILE;
  const path = named ?? defaultConfigFile(env);
  if (!path) return undefined;
  try {
    return { path, text: readFileSync(path, 'utf8') };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    if (!named && code === 'ENOENT') return undefined;
    const setting = named ? 'TEMPORAL_CONFIG_FILE' : `the Temporal config file ${path}`;
    throw new ConfigError(
      setting,
      `cannot read ${path} (${code === 'ENOENT' ? 'no such file' : code}): point it at a readable TOML file with [profile.<name>] tables, or unset it`,
      named ? 'variable' : 'setting',
    );
  }
}

/** envconfig's errors, said with the setting they are about and without the file's text. */
function explainLoadError(
  err: unknown,
  file: string | undefined,
  profile: string,
  text?: string,
): ConfigError {
  const e = err as Error & { line?: number; column?: number };
  const where = file ?? 'the Temporal config file';
  if (e.name === 'TomlError' || typeof e.line === 'number')
    // smol-toml's message quotes the lines around the error, which may hold an API key: only the position.
    return new ConfigError(
      file ? `TEMPORAL_CONFIG_FILE (${file})` : where,
      `not valid TOML at line ${e.line ?? '?'}, column ${e.column ?? '?'}: fix the file`,
      'setting',
    );
  const message = e.message ?? String(err);
  if (e instanceof TypeError)
    // A file with no [profile.*] table at all: envconfig trips over it.
    return new ConfigError(
      file ? `TEMPORAL_CONFIG_FILE (${file})` : where,
      `has no [profile.${profile}] table: write the settings under [profile.${profile}] (address, namespace, api_key, [profile.${profile}.tls])`,
      'setting',
    );
  if (/^Profile '.*' not found/.test(message)) return unknownProfile(profile, file, text);
  const both = /^Cannot specify both (\w+)_path and \w+_data/.exec(message);
  if (both) {
    const env = `TEMPORAL_TLS_${both[1]!.toUpperCase()}`;
    return new ConfigError(
      `${env}_PATH / ${env}_DATA or tls.${both[1]}_path / tls.${both[1]}_data in ${where}`,
      'give the file path or the PEM data, not both',
      'setting',
    );
  }
  if (/^Validation error/.test(message))
    return new ConfigError(
      file ? `TEMPORAL_CONFIG_FILE (${file})` : where,
      `${message.replace(/^Validation error: /, '')}; the keys of a profile are address, namespace, api_key, tls (client_cert_path, client_key_path, server_ca_cert_path, server_name, disabled, and the *_data forms), codec and grpc_meta`,
      'setting',
    );
  return new ConfigError(file ? `TEMPORAL_CONFIG_FILE (${file})` : where, message, 'setting');
}

function unknownProfile(profile: string, file: string | undefined, text?: string): ConfigError {
  if (!file)
    return new ConfigError(
      'TEMPORAL_PROFILE',
      `profile "${profile}" was asked for, but there is no Temporal config file (set TEMPORAL_CONFIG_FILE to a TOML file with a [profile.${profile}] table, or unset TEMPORAL_PROFILE)`,
    );
  const names = [...(text ?? '').matchAll(/^\s*\[\s*profile\.([A-Za-z0-9_-]+)\s*\]/gm)].map((m) => m[1]!);
  return new ConfigError(
    'TEMPORAL_PROFILE',
    `there is no profile "${profile}" in ${file} (it has: ${names.join(', ') || 'none'}); set TEMPORAL_PROFILE to one of them, or add a [profile.${profile}] table`,
  );
}

/**
 * Resolves the connection settings from the environment and the TOML profile, and checks them: an
 * address that is not host:port, a client key without a certificate (or a certificate without its
 * key), an unknown profile, a file that does not parse. Files named for TLS are read when connecting.
 */
export function resolveTemporal(env: NodeJS.ProcessEnv, port = 7233): TemporalSettings {
  const vars = effectiveEnv(env);
  normaliseBooleans(vars);
  const config = readConfigFile(vars);
  const profile = vars.TEMPORAL_PROFILE ?? 'default';
  const base: LoadClientProfileOptions = {
    ...(config ? { configSource: { data: config.text } } : { disableFile: true }),
    configFileStrict: true,
    overrideEnvVars: vars,
    ...(vars.TEMPORAL_PROFILE ? { profile: vars.TEMPORAL_PROFILE } : {}),
  };
  if (!config && vars.TEMPORAL_PROFILE) throw unknownProfile(profile, undefined);
  let fromFile: ClientConfigProfile = {};
  let merged: ClientConfigProfile;
  try {
    if (config) fromFile = loadClientConfigProfile({ ...base, disableEnv: true });
    merged = loadClientConfigProfile(base);
  } catch (err) {
    throw explainLoadError(err, config?.path, profile, config?.text);
  }
  const inFile = (key: string) => `${key} in profile "${profile}" of ${config?.path}`;
  const from = (variable: string, key: string, fileHas: boolean): string =>
    vars[variable] !== undefined ? variable : fileHas ? inFile(key) : variable;

  // The API key and the gRPC header values travel as headers: a line break (a key read from a file with
  // its newline) made the SDK fail with "cannot reach", or print the value. Named here, never shown.
  const unsafe =
    'holds a line break, a tab, blanks around it or a non-ASCII character (a trailing newline from the file it was read from?): a gRPC header carries printable ASCII only; remove them';
  if (merged.apiKey !== undefined && merged.apiKey !== '' && !HEADER_VALUE.test(merged.apiKey)) {
    const setting = from('TEMPORAL_API_KEY', 'api_key', fromFile.apiKey !== undefined);
    throw new ConfigError(setting, unsafe, setting === 'TEMPORAL_API_KEY' ? 'variable' : 'setting');
  }
  const metaVariable = (header: string): string | undefined =>
    Object.keys(vars).find(
      (k) =>
        k.startsWith('TEMPORAL_GRPC_META_') &&
        grpcMetaHeader(k.slice('TEMPORAL_GRPC_META_'.length)) === header,
    );
  const metadata: string[] = [];
  for (const [header, value] of Object.entries(merged.grpcMeta ?? {})) {
    const variable = metaVariable(header);
    const setting = variable ?? inFile(`grpc_meta.${header}`);
    metadata.push(setting);
    if (!HEADER_VALUE.test(value)) throw new ConfigError(setting, unsafe, variable ? 'variable' : 'setting');
  }

  const addressSet = merged.address !== undefined && merged.address !== '';
  const address = addressSet ? merged.address! : `127.0.0.1:${port}`;
  const addressFrom = addressSet
    ? from('TEMPORAL_ADDRESS', 'address', fromFile.address !== undefined)
    : 'TEMPORAL_ADDRESS unset: 127.0.0.1:TEMPORAL_PORT';
  if (!HOST_PORT.test(address))
    throw new ConfigError(
      addressFrom,
      `"${address}" is not host:port, e.g. 127.0.0.1:7233 or my-ns.a1b2c.tmprl.cloud:7233`,
      addressFrom === 'TEMPORAL_ADDRESS' ? 'variable' : 'setting',
    );
  const namespace = merged.namespace || DEFAULT_NAMESPACE;
  const namespaceFrom = merged.namespace
    ? from('TEMPORAL_NAMESPACE', 'namespace', fromFile.namespace !== undefined)
    : 'default';

  // TLS: the files it names, each with the setting that names it; a key and a certificate go together.
  const tls = merged.tls;
  const fileTls = fromFile.tls;
  const files: { setting: string; path: string; what: string }[] = [];
  const part = (
    name: 'clientCert' | 'clientKey' | 'serverCACert',
    env: string,
    key: string,
    what: string,
  ) => {
    const source = tls?.[name];
    if (!source) return undefined;
    const isPath = 'path' in source;
    const variable = `${env}_${isPath ? 'PATH' : 'DATA'}`;
    const setting = from(variable, `tls.${key}_${isPath ? 'path' : 'data'}`, fileTls?.[name] !== undefined);
    if (isPath) files.push({ setting, path: source.path, what });
    return setting;
  };
  const cert = part('clientCert', 'TEMPORAL_TLS_CLIENT_CERT', 'client_cert', 'client certificate');
  const key = part('clientKey', 'TEMPORAL_TLS_CLIENT_KEY', 'client_key', 'client key');
  const ca = part('serverCACert', 'TEMPORAL_TLS_SERVER_CA_CERT', 'server_ca_cert', 'server CA certificate');
  if (key && !cert)
    throw new ConfigError(
      key,
      'a client key is set but no client certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH (or tls.client_cert_path in the profile) to the certificate that goes with it, or unset the key',
      key.startsWith('TEMPORAL_') ? 'variable' : 'setting',
    );
  if (cert && !key)
    throw new ConfigError(
      cert,
      'a client certificate is set but no client key: set TEMPORAL_TLS_CLIENT_KEY_PATH (or tls.client_key_path in the profile) to its private key, or unset the certificate',
      cert.startsWith('TEMPORAL_') ? 'variable' : 'setting',
    );
  const apiKey = !!merged.apiKey;
  const mode: TemporalSettings['tls'] =
    tls?.disabled === true ? 'off' : cert ? 'mtls' : tls || apiKey ? 'tls' : 'off';
  // The SDK sends an API key over plain text when TLS is turned off: only to loopback (a local
  // TLS-terminating sidecar or a dev server), never across a network.
  if (apiKey && mode === 'off' && !LOOPBACK.test(address)) {
    const setting = from('TEMPORAL_TLS', 'tls.disabled', fileTls?.disabled !== undefined);
    throw new ConfigError(
      setting,
      `turns TLS off, so the API key (TEMPORAL_API_KEY or api_key) would travel to ${address} in plain text: remove it (an API key turns TLS on), or reach the server through a TLS-terminating proxy on loopback`,
      setting === 'TEMPORAL_TLS' ? 'variable' : 'setting',
    );
  }

  const settings: TemporalSettings = Object.freeze({
    address,
    addressFrom,
    addressSet,
    namespace,
    namespaceFrom,
    file: config?.path,
    profile,
    tls: mode,
    apiKey,
    metadata: Object.freeze(metadata),
    files: Object.freeze(files.map((f) => Object.freeze(f))),
  });
  loadOptions.set(settings, base);
  tlsSettings.set(settings, {
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    ...(ca ? { ca } : {}),
  });
  const keyData = tls?.clientKey && 'data' in tls.clientKey ? Buffer.from(tls.clientKey.data).toString() : '';
  secretValues.set(
    settings,
    [merged.apiKey ?? '', keyData, ...Object.values(merged.grpcMeta ?? {})].filter((v) => v.length >= 4),
  );
  return settings;
}

/** One line for logs: the address and where it came from, the namespace, TLS and API key as flags only. */
export function describeTemporal(s: TemporalSettings): string {
  const flags = [
    s.tls === 'mtls' ? 'mTLS' : s.tls === 'tls' ? 'TLS' : 'plain text',
    ...(s.apiKey ? ['API key'] : []),
    ...(s.file && s.addressFrom.includes(' of ') ? [`profile "${s.profile}"`] : []),
  ];
  return `${s.address} (${s.addressFrom}), namespace ${s.namespace}, ${flags.join(', ')}`;
}

/**
 * The SDK's connection options: the certificate and key files are read here (an error names the
 * setting and the path, never the contents), then envconfig's loadClientConnectConfig builds them.
 */
export function temporalConnectionOptions(s: TemporalSettings): ConnectionOptions {
  for (const f of s.files) {
    let text: string;
    try {
      accessSync(f.path, constants.R_OK);
      text = readFileSync(f.path, 'utf8');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      throw new ConfigError(
        f.setting,
        `cannot read the ${f.what} at ${f.path} (${code === 'ENOENT' ? 'no such file' : (code ?? 'error')}): point it at a readable PEM file`,
        f.setting.startsWith('TEMPORAL_') ? 'variable' : 'setting',
      );
    }
    if (!/-----BEGIN [A-Z0-9 ]+-----/.test(text))
      throw new ConfigError(
        f.setting,
        `the ${f.what} at ${f.path} is not a PEM file (no "-----BEGIN ...-----" line)`,
        f.setting.startsWith('TEMPORAL_') ? 'variable' : 'setting',
      );
  }
  const options = loadOptions.get(s);
  if (!options) throw new Error('Temporal settings must come from resolveTemporal()');
  let connect: ReturnType<typeof loadClientConnectConfig>;
  try {
    connect = loadClientConnectConfig(options);
  } catch (err) {
    throw explainLoadError(err, s.file, s.profile);
  }
  checkTlsMaterial(s, connect.connectionOptions.tls);
  // The address resolved above (with its default), whatever envconfig left unset.
  return { ...(connect.connectionOptions as ConnectionOptions), address: s.address };
}

/**
 * The client key, its certificate and the server CA, checked before connecting: a key or certificate
 * that does not parse, a key that is not the certificate's, a certificate out of its validity period
 * failed as "cannot reach ... start it" (the worker) or a refused handshake. Named, never shown.
 */
function checkTlsMaterial(s: TemporalSettings, tls: ConnectionOptions['tls']): void {
  if (!tls || typeof tls !== 'object') return;
  const named = tlsSettings.get(s) ?? {};
  const kind = (setting: string) => (setting.startsWith('TEMPORAL_') ? 'variable' : 'setting');
  const certificate = (pem: Uint8Array, setting: string, what: string): X509Certificate => {
    let x509: X509Certificate;
    try {
      x509 = new X509Certificate(Buffer.from(pem));
    } catch {
      throw new ConfigError(
        setting,
        `the ${what} is not a PEM certificate that can be read: give the certificate's PEM`,
        kind(setting),
      );
    }
    const now = Date.now();
    if (Date.parse(x509.validTo) < now)
      throw new ConfigError(setting, `the ${what} expired on ${x509.validTo}: renew it`, kind(setting));
    if (Date.parse(x509.validFrom) > now)
      throw new ConfigError(
        setting,
        `the ${what} is not valid before ${x509.validFrom}: check the clock, or use a certificate valid now`,
        kind(setting),
      );
    return x509;
  };
  if (tls.clientCertPair) {
    const keySetting = named.key ?? 'TEMPORAL_TLS_CLIENT_KEY_PATH';
    const certSetting = named.cert ?? 'TEMPORAL_TLS_CLIENT_CERT_PATH';
    let key: ReturnType<typeof createPrivateKey>;
    try {
      key = createPrivateKey(Buffer.from(tls.clientCertPair.key));
    } catch {
      throw new ConfigError(
        keySetting,
        'the client key is not an unencrypted PEM private key that can be read: give the key of the client certificate, in PEM',
        kind(keySetting),
      );
    }
    const x509 = certificate(tls.clientCertPair.crt, certSetting, 'client certificate');
    if (!x509.checkPrivateKey(key))
      throw new ConfigError(
        keySetting,
        `the client key is not the key of the client certificate (${certSetting}): give the pair that belong together`,
        kind(keySetting),
      );
  }
  if (tls.serverRootCACertificate) {
    const caSetting = named.ca ?? 'TEMPORAL_TLS_SERVER_CA_CERT_PATH';
    certificate(tls.serverRootCACertificate, caSetting, 'server CA certificate');
  }
}

/** The secrets among the Temporal settings (for the redaction of log lines and alerts). */
export function temporalSecrets(s: TemporalSettings): string[] {
  return secretValues.get(s) ?? [];
}
