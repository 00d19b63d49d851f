// node-postgres clients and pools for a database URL, with libpq's sslmode semantics: the settings
// are read once (db/pg-target.ts) and the same values reach pg_dump/pg_restore (db/pg-libpq.ts).
import pg from 'pg';
import { attempts } from './pg-attempts.js';
import { explainConnectError } from './pg-errors.js';
import { FallbackStream, type Attempt } from './pg-fallback-stream.js';
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

const TARGET = Symbol('tidemark.pgTarget');
type TargetConfig = pg.ClientConfig & { [TARGET]?: PgTarget };

/**
 * A pg.Client that makes libpq's attempts (allow: plain then TLS; prefer: TLS then plain) and
 * explains TLS failures. Pools create it through their `Client` option. One sslmode attempt
 * (disable, require, verify-*, a unix socket) is pg's own `ssl` setting; two are made under this
 * one client by a FallbackStream (db/pg-fallback-stream.ts) given to pg as its `stream`, so the
 * client, its queued queries and its listeners (the pool's) are the same whichever attempt wins.
 */
export class TidemarkPgClient extends pg.Client {
  // Private fields: the target holds the connection string (with its password) and the attempts
  // the client key; neither shows when the client is printed.
  readonly #target: PgTarget;
  readonly #fallback: FallbackStream | undefined;
  readonly #tls: boolean;
  /** A TLS file that could not be read when this client was made: connect() fails with it. */
  readonly #unreadable: unknown;
  constructor(config: TargetConfig) {
    const target = config[TARGET];
    if (!target) throw new Error('TidemarkPgClient needs a config from pgClientConfig (db/pg-connection.ts)');
    // The files are read for every new client (a rotated certificate is picked up, as libpq does).
    // One that cannot be read any more fails connect(), never the constructor: pg-pool makes
    // clients inside a released client's 'end' callback, where a throw kills the process.
    let plan: Attempt[];
    let unreadable: unknown;
    try {
      plan = attempts(target);
    } catch (err) {
      unreadable = err;
      plan = [false];
    }
    const fallback = plan.length > 1 ? new FallbackStream(plan) : undefined;
    super(fallback ? { ...config, ssl: false, stream: () => fallback } : { ...config, ssl: plan[0]! });
    this.#target = target;
    this.#fallback = fallback;
    this.#tls = plan[0] !== false;
    this.#unreadable = unreadable;
  }

  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error | null, c?: pg.Client) => void): void;
  override connect(callback?: (err: Error | null, c?: pg.Client) => void): Promise<pg.Client> | void {
    const p = this.#connect().then(() => this as pg.Client);
    if (!callback) return p;
    p.then(
      (c) => callback(null, c),
      (err: Error) => callback(err),
    );
  }

  async #connect(): Promise<void> {
    if (this.#unreadable) throw this.#unreadable;
    try {
      await super.connect();
    } catch (err) {
      throw explainConnectError(err, this.#target, this.#fallback?.tls ?? this.#tls);
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
