// One pooled connection held for a unit of work, with a kysely instance bound to it: the window
// transaction runs on it, so that a handler may COPY rows (which kysely cannot send) over the
// same connection, inside the same transaction as the window's done marker.
import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { poolOf } from './database.js';
import type { Database } from './schema.js';

/** A kysely instance per pooled client, made once: the pool hands the same clients out again. */
const bound = new WeakMap<pg.PoolClient, Kysely<Database>>();

function boundTo(client: pg.PoolClient): Kysely<Database> {
  let k = bound.get(client);
  if (!k) {
    // kysely takes a client from its "pool" for each query or transaction and releases it after:
    // here always this one, and releasing it is left to withConnection.
    const lease = {
      query: (...args: Parameters<pg.PoolClient['query']>) => client.query(...args),
      release: () => undefined,
    };
    const pool = { connect: async () => lease, end: async () => undefined, options: {} };
    k = new Kysely<Database>({ dialect: new PostgresDialect({ pool: pool as never }) });
    bound.set(client, k);
  }
  return k;
}

/**
 * Runs `fn` with a connection of its own from `db`'s pool, as kysely and as the raw client. A
 * connection that `fn` failed on is closed rather than reused: it may be broken, or still inside
 * a transaction whose rollback did not get through.
 */
export async function withConnection<T>(
  db: Kysely<Database>,
  fn: (conn: Kysely<Database>, client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const client = await poolOf(db).connect();
  let failed = false;
  try {
    return await fn(boundTo(client), client);
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    client.release(failed);
  }
}
