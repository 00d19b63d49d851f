// Connecting to Temporal with the settings config/temporal.ts resolved: a plain connection, a client
// with the project's interceptors and data converter, the workers' native connection; and a failed
// connect said with the address and setting it came from, and what to check, never a secret.
import type { Client, Connection, ConnectionOptions } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { NativeConnection } from '@temporalio/worker';
import { ConfigError } from '../contract/config-error.js';
import { temporalConnectionOptions, temporalSecrets, type TemporalSettings } from '../config/temporal.js';

/** A connection that failed: which address, from which setting, and what to check. No secret in it. */
export class TemporalConnectError extends Error {
  readonly code = 'TEMPORAL_CONNECT';
  constructor(
    readonly setting: string,
    message: string,
  ) {
    super(message);
    this.name = 'TemporalConnectError';
  }
}

/** The SDK's reason with its causes ("Failed to connect": why), made safe: no secret in it, one line. */
function reasonOf(err: unknown, secrets: readonly string[]): string {
  const parts: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && depth < 5; depth++) {
    const message = e instanceof Error ? e.message : String(e);
    if (message && !parts.some((p) => p.includes(message))) parts.push(message);
    e = e instanceof Error ? e.cause : undefined;
  }
  let text = parts.join(': ');
  for (const s of secrets) if (s.length >= 4) text = text.split(s).join('[redacted]');
  return text.replace(/\s+/g, ' ').trim().slice(0, 400);
}

const TLS_HINT = /tls|ssl|certificate|handshake|alert|x509|peer|unknownissuer|bad ?record|\b400\b|protocol/i;
const UNREACHABLE = /refused|unreachable|timed? ?out|deadline|dns|resolve|not known|no route|ECONN/i;
const AUTH = /unauthenticated|permission ?denied|unauthori[sz]ed|\b40[13]\b|api key|invalid token/i;

/** Turns a failed connect into an error that says which address and setting, and what to check. */
export function explainConnectError(
  err: unknown,
  s: TemporalSettings,
  secrets: readonly string[] = [],
): Error {
  if (err instanceof ConfigError || err instanceof TemporalConnectError) return err;
  const reason = reasonOf(err, secrets);
  const at = `Temporal at ${s.address} (from ${s.addressFrom})`;
  const tlsSettings =
    s.tls === 'mtls'
      ? 'TEMPORAL_TLS_CLIENT_CERT_PATH / TEMPORAL_TLS_CLIENT_KEY_PATH (a client certificate the server trusts) and TEMPORAL_TLS_SERVER_CA_CERT_PATH (the CA that signed the server certificate)'
      : 'TEMPORAL_TLS_* (the server may require a client certificate: TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH; TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private CA)';
  const inProfile =
    s.file && s.addressFrom.includes(' of ') ? `, or the tls keys of profile "${s.profile}"` : '';
  if (s.apiKey && AUTH.test(reason))
    return new TemporalConnectError(
      'TEMPORAL_API_KEY',
      `${at} refused the API key (${reason}): check TEMPORAL_API_KEY (or api_key in the profile) and TEMPORAL_NAMESPACE (${s.namespace})`,
    );
  if (AUTH.test(reason))
    // Up, and answering: it wants credentials (a header given as gRPC metadata, or none at all).
    return new TemporalConnectError(
      s.metadata[0] ?? 'TEMPORAL_API_KEY',
      s.metadata.length
        ? `${at} refused the credentials (${reason}): check ${s.metadata.join(', ')} and TEMPORAL_NAMESPACE (${s.namespace}), or set TEMPORAL_API_KEY`
        : `${at} refused the credentials (${reason}): it wants them: set TEMPORAL_API_KEY (or api_key in the profile), or the header it expects with TEMPORAL_GRPC_META_<NAME>`,
    );
  if (s.tls === 'off' && /the server answers TLS/.test(reason))
    return new TemporalConnectError(
      'TEMPORAL_TLS',
      `${at} speaks TLS, but the connection was plain text (${reason}): set TEMPORAL_TLS=true (TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private CA; TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH if it asks for a client certificate)${inProfile ? `, or tls in profile "${s.profile}"` : ''}`,
    );
  if (s.tls !== 'off' && TLS_HINT.test(reason) && !/connection refused/i.test(reason))
    return new TemporalConnectError(
      'TEMPORAL_TLS',
      `${at} refused the TLS connection (${reason}): check ${tlsSettings}${inProfile}`,
    );
  if (s.tls === 'off' && /protocol|http2|frame|h2|tls|broken pipe|reset/i.test(reason))
    return new TemporalConnectError(
      s.addressFrom,
      `cannot reach ${at} (${reason}): the server may require TLS; set TEMPORAL_TLS=true (and TEMPORAL_TLS_* for a client certificate) or check ${s.addressFrom}`,
    );
  const hint = UNREACHABLE.test(reason) || s.tls === 'off' ? '' : `; if it is up, check ${tlsSettings}`;
  const fix = s.addressSet ? `fix ${s.addressFrom}` : 'set TEMPORAL_ADDRESS';
  return new TemporalConnectError(
    s.addressSet ? s.addressFrom : 'TEMPORAL_ADDRESS',
    `cannot reach ${at} (${reason}): start it (npx tidemark dev runs a dev server when no address is set) or ${fix}${hint}`,
  );
}

/**
 * When a TLS connection failed without saying why (the SDK's "Failed to connect before the deadline"),
 * one TLS handshake of our own with the same certificates tells: the server's certificate not trusted,
 * the client certificate refused, or nothing listening. Undefined when the handshake succeeds.
 */
async function probeTls(options: ConnectionOptions): Promise<string | undefined> {
  const tlsOptions = (typeof options.tls === 'object' && options.tls) || {};
  const [host, port] = splitAddress(options.address!);
  const { connect } = await import('node:tls');
  const { isIP } = await import('node:net');
  const servername = tlsOptions.serverNameOverride ?? (isIP(host) ? undefined : host);
  return await new Promise<string | undefined>((resolve) => {
    const socket = connect({
      host,
      port,
      ...(servername ? { servername } : {}),
      ALPNProtocols: ['h2'],
      ...(tlsOptions.serverRootCACertificate ? { ca: Buffer.from(tlsOptions.serverRootCACertificate) } : {}),
      ...(tlsOptions.clientCertPair
        ? {
            cert: Buffer.from(tlsOptions.clientCertPair.crt),
            key: Buffer.from(tlsOptions.clientCertPair.key),
          }
        : {}),
    });
    const done = (reason: string | undefined) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(reason);
    };
    const timer = setTimeout(() => done(undefined), 3_000);
    socket.once('secureConnect', () => {
      // A server that checks the client certificate after the handshake (TLS 1.3) says so with an alert.
      socket.once('error', (err: NodeJS.ErrnoException) =>
        done(`TLS: ${err.code ?? ''} ${err.message}`.trim()),
      );
      setTimeout(() => done(undefined), 500);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      const code = err.code ?? '';
      if (/^E(CONNREFUSED|HOSTUNREACH|NETUNREACH|NOTFOUND|AI_AGAIN)|^ENOTFOUND/.test(code))
        done(`connection: ${code}`);
      else done(`TLS handshake: ${err.message}${code ? ` (${code})` : ''}`);
    });
  });
}

/** True when the server at `address` answers a TLS handshake (whatever its certificate). */
async function speaksTls(address: string): Promise<boolean> {
  const [host, port] = splitAddress(address);
  const { connect } = await import('node:tls');
  const { isIP } = await import('node:net');
  return await new Promise<boolean>((resolve) => {
    const socket = connect({
      host,
      port,
      ...(isIP(host) ? {} : { servername: host }),
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
    });
    const done = (answer: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done(false), 3_000);
    socket.once('secureConnect', () => done(true));
    // A TLS alert (a client certificate asked for) is a TLS answer too; "wrong version number" is not.
    socket.once('error', (err: Error) => done(/alert|certificate/i.test(err.message)));
  });
}

function splitAddress(address: string): [string, number] {
  const at = address.lastIndexOf(':');
  return [address.slice(0, at).replace(/^\[|\]$/g, ''), Number(address.slice(at + 1))];
}

/** The failure as an error that names the setting; for TLS without a reason, a handshake of our own says why. */
async function connectFailure(err: unknown, s: TemporalSettings, options: ConnectionOptions): Promise<Error> {
  const secrets = temporalSecrets(s);
  const reason = reasonOf(err, secrets);
  if (s.tls === 'off') {
    // A plain connection to a TLS server fails as "deadline" or "connection closed": ask the server.
    if (AUTH.test(reason) || /refused|ECONNREFUSED/i.test(reason) || !(await speaksTls(options.address!)))
      return explainConnectError(err, s, secrets);
    return explainConnectError(new Error(`${reason}; the server answers TLS`), s, secrets);
  }
  if (TLS_HINT.test(reason)) return explainConnectError(err, s, secrets);
  const probe = await probeTls(options).catch(() => undefined);
  if (!probe) return explainConnectError(err, s, secrets);
  return explainConnectError(new Error(`${reasonOf(err, secrets)}; ${probe}`), s, secrets);
}

/** A plain connection (reachability checks, search attributes); closed by the caller. */
export async function connectTemporal(
  s: TemporalSettings,
  opts: { connectTimeout?: number } = {},
): Promise<Connection> {
  const options = temporalConnectionOptions(s);
  // Loaded here, not with the module: loadConfig() resolves the settings in every process, most of
  // which never connect.
  const { Connection } = await import('@temporalio/client');
  try {
    return await Connection.connect({ ...options, connectTimeout: opts.connectTimeout ?? 10_000 });
  } catch (err) {
    throw await connectFailure(err, s, options);
  }
}

export interface TemporalClient {
  connection: Connection;
  client: Client;
}

/**
 * A client on the configured namespace with the project's interceptors and data converter: the CLI,
 * the page, the Slack app, the worker's own client and the dev stack all get theirs here.
 */
export async function connectTemporalClient(
  config: { readonly temporal: TemporalSettings },
  opts: { connectTimeout?: number; dataConverter?: DataConverter | undefined } = {},
): Promise<TemporalClient> {
  const connection = await connectTemporal(config.temporal, opts);
  const [{ Client }, { clientInterceptors }, { temporalDataConverter }] = await Promise.all([
    import('@temporalio/client'),
    import('./tracing.js'),
    import('../codec/index.js'),
  ]);
  const dataConverter = 'dataConverter' in opts ? opts.dataConverter : temporalDataConverter();
  const client = new Client({
    connection,
    namespace: config.temporal.namespace,
    interceptors: clientInterceptors(),
    ...(dataConverter ? { dataConverter } : {}),
  });
  return { connection, client };
}

/** The workers' connection (the SDK's native one), with the same settings. */
export async function connectTemporalWorker(config: {
  readonly temporal: TemporalSettings;
}): Promise<NativeConnection> {
  const s = config.temporal;
  const options = temporalConnectionOptions(s);
  const { NativeConnection } = await import('@temporalio/worker');
  try {
    return await NativeConnection.connect({
      address: options.address!,
      ...(options.tls !== undefined ? { tls: options.tls } : {}),
      ...(options.apiKey !== undefined ? { apiKey: options.apiKey as string } : {}),
      ...(options.metadata ? { metadata: options.metadata as Record<string, string> } : {}),
    });
  } catch (err) {
    throw await connectFailure(err, s, options);
  }
}
