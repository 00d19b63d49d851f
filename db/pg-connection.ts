// node-postgres clients and pools for a database URL, with libpq's sslmode semantics: the settings
// are read once (db/pg-target.ts) and the same values reach pg_dump/pg_restore (db/pg-libpq.ts).
import { Readable, type Duplex } from 'node:stream';
import pg from 'pg';
import { attempts } from './pg-attempts.js';
import { explainConnectError } from './pg-errors.js';
import { COPY_TO_REFUSED, SslModeSocket, type Attempt } from './pg-socket.js';
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
 * A pg.Client with libpq's attempts for the sslmode, that explains TLS failures. Pools create it
 * through their `Client` option. One attempt (disable, require, verify-*, a unix socket): pg's
 * own `ssl` option. Two (allow, prefer): pg gets ssl=false and an SslModeSocket through its
 * documented `stream` option, which makes both attempts under this one client (db/pg-socket.ts).
 */
export class TidemarkPgClient extends pg.Client {
  // The target holds the connection string (with its password): private, as pg hides its own copy.
  readonly #target: PgTarget;
  readonly #socket: SslModeSocket | undefined;
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
    const socket = plan.length > 1 ? new SslModeSocket(plan) : undefined;
    super(
      socket
        ? { ...config, ssl: false, stream: () => socket as unknown as Duplex }
        : { ...config, ssl: plan[0]! },
    );
    this.#target = target;
    this.#socket = socket;
    this.#tls = plan[0] !== false;
    this.#unreadable = unreadable;
    if (socket) this.query = refusingCopyTo(this);
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
      throw explainConnectError(err, this.#target, this.#socket?.tls ?? this.#tls);
    }
  }
}

/**
 * COPY TO (pg-copy-streams' Readable CopyStreamQuery, COPY BOTH too) reads pg's stream as a
 * Readable, which the socket of prefer/allow is not. It is refused before pg queues it: once
 * queued, its refusal would come too late (pg's reader already detached), wedging the client.
 */
function refusingCopyTo(client: pg.Client): pg.Client['query'] {
  return ((config: unknown, ...rest: unknown[]) => {
    if (config instanceof Readable && config.constructor.name === 'CopyStreamQuery')
      throw new Error(COPY_TO_REFUSED);
    // The class's query, looked up at each call (not bound once): a wrapper set on pg's prototype
    // later (the scale bench's statement capture) still sees this client's queries.
    const query = (Object.getPrototypeOf(client) as pg.Client).query as (...a: unknown[]) => unknown;
    return query.call(client, config, ...rest);
  }) as pg.Client['query'];
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

/**
 * A client for a URL (connect() as usual). A connection that dies (its backend terminated, the
 * server restarted) fails the statement in flight and every later one; the client's 'error' event
 * that follows is heard here, as an 'error' event with no listener would end the process.
 */
export function pgClient(
  url: string,
  extra: Omit<pg.ClientConfig, 'connectionString' | 'ssl'> = {},
): pg.Client {
  const client = new TidemarkPgClient(pgClientConfig(url, extra));
  client.on('error', () => undefined);
  return client;
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
