// One pooled connection held for a unit of work, with a kysely instance bound to it: the window
// transaction runs on it, so that a handler may COPY rows (which kysely cannot send) over the
// same connection, inside the same transaction as the window's done marker.
//
// On it, a transaction's BEGIN need not cost a round trip of its own: a first statement written
// as "begin; ..." carries it, and a last one written as "...; commit" carries the COMMIT. Any
// other first statement gets its BEGIN sent just before it, and a transaction whose last
// statement did not commit is committed on its own, so the order of statements never matters
// for correctness, only for speed.
import {
  Kysely,
  PostgresAdapter,
  PostgresDriver,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type TransactionSettings,
} from 'kysely';
import pg from 'pg';
import { poolOf } from './database.js';
import type { Database } from './schema.js';

/** A value written into SQL text as a literal (for statements that carry BEGIN or COMMIT). */
export function literal(v: string | number | Date | null): string {
  if (v === null) return 'null';
  if (typeof v === 'number' && !Number.isFinite(v)) throw new Error(`${v} cannot be written as a literal`);
  return pg.escapeLiteral(v instanceof Date ? v.toISOString() : String(v));
}

const CARRIES_BEGIN = /^\s*begin\s*;/i;

/** The client as kysely sees it on the held connection, keeping count of BEGIN and COMMIT. */
class Lease {
  /** A transaction was begun by kysely and its BEGIN not sent yet. */
  beginOwed = false;
  /** The transaction's COMMIT went with its last statement. */
  committed = false;
  constructor(private readonly client: pg.PoolClient) {}

  async query(text: string, params: unknown[]): Promise<pg.QueryResult> {
    const carriesBegin = CARRIES_BEGIN.test(text);
    if (carriesBegin && !this.beginOwed) {
      throw new Error('a statement that carries BEGIN runs only first in a transaction begun by kysely');
    }
    if (this.beginOwed) {
      this.beginOwed = false;
      if (!carriesBegin) await this.client.query('begin');
    }
    const result = (await this.client.query(text, params)) as pg.QueryResult | pg.QueryResult[];
    if (!Array.isArray(result)) return result;
    // "begin; X" or "X; commit": what X returned.
    const last = result[result.length - 1]!;
    if (last.command === 'COMMIT') {
      this.committed = true;
      return result[result.length - 2]!;
    }
    // A COMMIT answered ROLLBACK: an earlier statement's error left the transaction aborted.
    if (last.command === 'ROLLBACK') throw new Error('the transaction was rolled back, not committed');
    return last;
  }

  release(): void {
    // Released by withConnection, not after each query.
  }
}

class HeldConnectionDriver extends PostgresDriver {
  constructor(private readonly lease: Lease) {
    super({ pool: { connect: async () => lease, end: async () => undefined, options: {} } as never });
  }

  override async beginTransaction(
    connection: DatabaseConnection,
    settings: TransactionSettings,
  ): Promise<void> {
    if (settings.isolationLevel || settings.accessMode)
      return await super.beginTransaction(connection, settings);
    this.lease.beginOwed = true;
    this.lease.committed = false;
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    if (this.lease.beginOwed) {
      this.lease.beginOwed = false; // nothing was sent: nothing to commit
      return;
    }
    if (!this.lease.committed) await super.commitTransaction(connection);
  }

  override async rollbackTransaction(
    connection: Parameters<PostgresDriver['rollbackTransaction']>[0],
  ): Promise<void> {
    if (this.lease.beginOwed) {
      this.lease.beginOwed = false;
      return;
    }
    // Committed with its last statement: there is nothing left to roll back.
    if (!this.lease.committed) await super.rollbackTransaction(connection);
  }
}

/** A kysely instance per pooled client, made once: the pool hands the same clients out again. */
const bound = new WeakMap<pg.PoolClient, Kysely<Database>>();

function boundTo(client: pg.PoolClient): Kysely<Database> {
  let k = bound.get(client);
  if (!k) {
    const lease = new Lease(client);
    const dialect: Dialect = {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new HeldConnectionDriver(lease),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    };
    k = new Kysely<Database>({ dialect });
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
