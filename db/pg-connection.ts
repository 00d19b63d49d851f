// node-postgres clients and pools for a database URL, with libpq's sslmode semantics: the settings
// are read once (db/pg-target.ts) and the same values reach pg_dump/pg_restore (db/pg-libpq.ts).
import type { ConnectionOptions } from 'node:tls';
import pg from 'pg';
import { attempts } from './pg-attempts.js';
import { explainConnectError } from './pg-errors.js';
import { resolvePg, type PgTarget } from './pg-target.js';

export { attempts } from './pg-attempts.js';
export { explainConnectError } from './pg-errors.js';
export { serverIdentity } from './pg-identity.js';
export { libpqConnection } from './pg-libpq.js';
export {
  PgSettingError,
  redactUrl,
  resolvePg,
  SSL_MODES,
  type PgTarget,
  type PgTls,
  type SslMode,
} from './pg-target.js';

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);
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
