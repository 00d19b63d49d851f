// One pooled connection held for a unit of work, with a kysely instance bound to it: the window
// transaction runs on it, so that a handler may COPY rows (which kysely cannot send) over the
// same connection, inside the same transaction as the window's done marker.
//
// On it, a transaction's BEGIN need not cost a round trip of its own: a first statement written
// as "begin; ..." carries it, and a last one written as "...; commit" carries the COMMIT. Any
// other first statement gets its BEGIN sent just before it, and a transaction whose last
// statement did not commit is committed on its own, so the order of statements never matters
// for correctness, only for speed.
//
// Its parameterised statements (a handler's, run once a window) are prepared under a name of the
// connection's own and their plans kept, as mature drivers do (pgjdbc, pgx): planned once per
// connection, not once per window. A statement the server refused to prepare is prepared again
// next time; a cached plan whose table changed shape ("cached plan must not change result type")
// fails its attempt, every connection of the process then prepares its statements again, so the
// retry does not meet the same stale plan on another connection, and that text is no longer kept
// (its result may change again: a search_path set per window).
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
import { LedgerSchema, schemaOf } from './ledger-schema.js';
import type { Database } from './schema.js';

/** A value written into SQL text as a literal (for statements that carry BEGIN or COMMIT). */
export function literal(v: string | number | Date | null): string {
  if (v === null) return 'null';
  if (typeof v === 'number' && !Number.isFinite(v)) throw new Error(`${v} cannot be written as a literal`);
  return pg.escapeLiteral(v instanceof Date ? v.toISOString() : String(v));
}

const CARRIES_BEGIN = /^\s*begin\s*;/i;
/** A statement worth a kept plan: one data statement (a text with ";" is sent as it is). */
const PLANNED = /^\s*(select|insert|update|delete|with|merge)\b[^;]*$/i;
/** Statements kept per connection: a handler writing values into its text would make ever more. */
const KEPT_PER_CONNECTION = 200;
/** Raised when a table changed under a kept plan: every connection names its statements afresh. */
let planEpoch = 0;
const STALE_PLAN = 'cached plan must not change result type';
/**
 * Texts that met a stale plan are sent unnamed from then on: one whose result changes from window
 * to window (a search_path set per window, a table made anew in another shape) would otherwise
 * fail an attempt at every change. Bounded: past it, such a text fails an attempt per change.
 */
const unkept = new Set<string>();
const MAX_UNKEPT = 1_000;
/** A SET that outlasts the transaction (SET, SET SESSION, SET ROLE, ...), unlike SET LOCAL. */
const SESSION_SET = /^\s*set\s+(?!local\b)(?!transaction\b)(?!constraints\b)/i;
/** set_config(name, value, false): a session setting too (its third argument a literal or a parameter). */
const SESSION_SET_CONFIG = /\bset_config\s*\([^;]*?,\s*(false|\$(\d+))\s*\)/gi;
/** Comments, quoted literals and identifiers, dollar-quoted bodies: text that is not SQL to match. */
const NOT_CODE = /--[^\n]*|\/\*[\s\S]*?\*\/|'(?:[^']|'')*'|"(?:[^"]|"")*"|(\$[A-Za-z_0-9]*\$)[\s\S]*?\1/g;

/** A statement that ends the transaction (ROLLBACK TO a savepoint does not). */
const ENDS_TRANSACTION =
  /^\s*(commit|end|abort|rollback(?!\s+((work|transaction)\s+)?to\b)|prepare\s+transaction)\b/i;

/** The statement of `text` that would end the transaction, if one would. */
export function endingStatement(text: string): string | undefined {
  const code = text.replace(NOT_CODE, (m) => (m.startsWith('-') || m.startsWith('/') ? ' ' : "''"));
  return code
    .split(';')
    .find((statement) => ENDS_TRANSACTION.test(statement))
    ?.trim()
    .slice(0, 60);
}

/** Whether `text` (any of its statements) sets something for the session rather than the transaction. */
export function setsSession(text: string, params: readonly unknown[] = []): boolean {
  const code = text.replace(NOT_CODE, (m) => (m.startsWith('-') || m.startsWith('/') ? ' ' : "''"));
  if (code.split(';').some((statement) => SESSION_SET.test(statement))) return true;
  for (const m of code.matchAll(SESSION_SET_CONFIG)) {
    if (m[2] === undefined) return true;
    const v = params[Number(m[2]) - 1];
    if (v === false || v === 'false' || v === 'f') return true;
  }
  return false;
}

/** The client as kysely sees it on the held connection, keeping count of BEGIN and COMMIT. */
class Lease {
  /** A transaction was begun by kysely and its BEGIN not sent yet. */
  beginOwed = false;
  /** Inside a transaction begun by kysely, until kysely commits or rolls it back. */
  inTransaction = false;
  /** The transaction's COMMIT went with its last statement. */
  committed = false;
  /** The statement that ended the transaction before kysely did (a COMMIT or ROLLBACK of its own). */
  endedBy: string | undefined;
  /** Set while a handler runs: a statement of its own that would end the transaction is not sent. */
  sealed = false;
  /** The ending statement refused while sealed: the transaction can only roll back now. */
  refusedEnd: string | undefined;
  /** Statement text -> the name it is prepared under on this connection. */
  private names = new Map<string, string>();
  private epoch = planEpoch;
  private named = 0;
  /** Names whose statement ran at least once on this connection. */
  private proven = new Set<string>();
  constructor(private readonly client: pg.PoolClient) {}

  /** The name to prepare `text` under, or undefined to send it unnamed (planned each time). */
  private nameOf(text: string, params: unknown[]): string | undefined {
    if (params.length === 0 || !PLANNED.test(text) || unkept.has(text)) return undefined;
    if (this.epoch !== planEpoch) {
      this.epoch = planEpoch;
      this.names.clear();
      this.proven.clear();
    }
    let name = this.names.get(text);
    if (name === undefined && this.names.size < KEPT_PER_CONNECTION) {
      name = `tidemark_${++this.named}`;
      this.names.set(text, name);
    }
    return name;
  }

  private async send(text: string, params: unknown[]): Promise<pg.QueryResult | pg.QueryResult[]> {
    const name = this.nameOf(text, params);
    if (name === undefined)
      return (await this.client.query(text, params)) as pg.QueryResult | pg.QueryResult[];
    try {
      const result = await this.client.query({ name, text, values: params });
      this.proven.add(name);
      return result;
    } catch (err) {
      // A statement refused or made stale by a changed table (a stale plan; class 42: a column or
      // operator gone, a parameter whose type no longer fits) is prepared again under a new name.
      // One that failed on its data (a duplicate key, a bad value: caught by the handler in a
      // savepoint) keeps its name: a new one each time would leave one more prepared statement on
      // the connection per failure.
      const code = (err as { code?: unknown } | null)?.code;
      const refused = typeof code === 'string' && code.startsWith('42');
      // A kept statement that ran before and is refused now met a changed table: so would the
      // same statement kept on the other connections, on the attempt's retry.
      const stale =
        (err instanceof Error && err.message.includes(STALE_PLAN)) || (refused && this.proven.has(name));
      if (stale || refused) this.names.delete(text);
      if (stale) {
        if (unkept.size < MAX_UNKEPT) unkept.add(text);
        planEpoch++;
      }
      throw err;
    }
  }

  async query(text: string, params: unknown[]): Promise<pg.QueryResult> {
    // Once the transaction has ended, a statement would run on its own and commit at once,
    // apart from the statements before it: refused, not sent.
    if (this.inTransaction && (this.committed || this.endedBy !== undefined)) {
      throw new Error(
        `the transaction already ended (${this.committed ? 'committed' : `by "${this.endedBy}"`}); a statement after its end is not sent`,
      );
    }
    // A handler's COMMIT would commit the window's claim (its done marker) without its finish, and
    // a preview's rolled-back work with it; its ROLLBACK would make what follows commit statement
    // by statement. Refused before it is sent; the attempt then fails, and nothing of it commits.
    if (this.inTransaction && this.refusedEnd !== undefined) {
      throw new Error(
        `the handler tried to end the window's transaction ("${this.refusedEnd}"): the attempt fails and nothing of it commits; a statement after it is not sent`,
      );
    }
    const ending = this.inTransaction && this.sealed ? endingStatement(text) : undefined;
    if (ending !== undefined) {
      this.refusedEnd = ending;
      throw new Error(
        `"${ending}" would end the window's transaction before tidemark ends it: nothing was sent, and nothing of the attempt commits (use a savepoint to undo part of the handler's work)`,
      );
    }
    // The connection goes back to the pool: a session setting would apply to whatever runs on it next.
    if (this.inTransaction && setsSession(text, params)) {
      throw new Error(
        `"${text.trim().slice(0, 60)}" would outlast the window's transaction on a pooled connection: use SET LOCAL (it ends with the transaction); nothing was sent`,
      );
    }
    const carriesBegin = CARRIES_BEGIN.test(text);
    if (carriesBegin && !this.beginOwed) {
      throw new Error('a statement that carries BEGIN runs only first in a transaction begun by kysely');
    }
    if (this.beginOwed) {
      this.beginOwed = false;
      if (!carriesBegin) await this.client.query('begin');
    }
    const result = await this.send(text, params);
    const last = Array.isArray(result) ? result[result.length - 1]! : result;
    // "begin; X" or "X; commit": what X returned.
    if (Array.isArray(result) && last.command === 'COMMIT') {
      this.committed = true;
      return result[result.length - 2]!;
    }
    // A statement of the caller's (a handler's "commit" or "rollback") ended the transaction:
    // what it had done is committed or gone, and what follows would commit statement by statement.
    if (this.inTransaction && this.client.getTransactionStatus() === 'I') {
      this.endedBy = String(text).trim().slice(0, 60);
      throw new Error(
        `the statement "${this.endedBy}" ended the transaction begun by kysely; only kysely may end it`,
      );
    }
    // A COMMIT answered ROLLBACK: an earlier statement's error left the transaction aborted.
    if (Array.isArray(result) && last.command === 'ROLLBACK') {
      throw new Error('the transaction was rolled back, not committed');
    }
    return last;
  }

  /** Forgets the transaction kysely is ending; returns how it stood. */
  end(): {
    beginOwed: boolean;
    committed: boolean;
    endedBy: string | undefined;
    refusedEnd: string | undefined;
  } {
    const state = {
      beginOwed: this.beginOwed,
      committed: this.committed,
      endedBy: this.endedBy,
      refusedEnd: this.refusedEnd,
    };
    this.refusedEnd = undefined;
    this.beginOwed = false;
    this.inTransaction = false;
    this.committed = false;
    this.endedBy = undefined;
    return state;
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
    this.lease.end();
    if (settings.isolationLevel || settings.accessMode) await super.beginTransaction(connection, settings);
    else this.lease.beginOwed = true;
    this.lease.inTransaction = true;
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const { beginOwed, committed, endedBy, refusedEnd } = this.lease.end();
    if (refusedEnd !== undefined) {
      await super.rollbackTransaction(connection as Parameters<PostgresDriver['rollbackTransaction']>[0]);
      throw new Error(
        `the handler tried to end the window's transaction ("${refusedEnd}"): rolled back, nothing was committed`,
      );
    }
    // Nothing was sent (nothing to commit), or the COMMIT went with the last statement.
    if (beginOwed || committed) return;
    if (endedBy !== undefined) {
      throw new Error(
        `the transaction was ended by "${endedBy}" before its commit: it did not commit as one`,
      );
    }
    await super.commitTransaction(connection);
  }

  override async rollbackTransaction(
    connection: Parameters<PostgresDriver['rollbackTransaction']>[0],
  ): Promise<void> {
    const { beginOwed, committed, endedBy } = this.lease.end();
    // Nothing was sent, or the transaction already ended: there is nothing left to roll back.
    if (beginOwed || committed || endedBy !== undefined) return;
    await super.rollbackTransaction(connection);
  }
}

/**
 * A kysely instance per pooled client, made once: the pool hands the same clients out again (a
 * pool is one handle's, so the ledger's schema it names stays that handle's).
 */
const bound = new WeakMap<pg.PoolClient, Kysely<Database>>();
const leases = new WeakMap<pg.PoolClient, Lease>();

/**
 * Runs `fn` (a job's handler) with the transaction open on `client` sealed: a statement of the
 * handler's that would end it (COMMIT, ROLLBACK, END, ...) is refused instead of sent.
 */
export async function sealedTransaction<T>(client: pg.PoolClient, fn: () => Promise<T>): Promise<T> {
  const lease = leases.get(client);
  if (!lease) return await fn();
  lease.sealed = true;
  try {
    return await fn();
  } finally {
    lease.sealed = false;
  }
}

function boundTo(client: pg.PoolClient, schema: string): Kysely<Database> {
  let k = bound.get(client);
  if (!k) {
    const lease = new Lease(client);
    leases.set(client, lease);
    const dialect: Dialect = {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new HeldConnectionDriver(lease),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    };
    k = new Kysely<Database>({ dialect, plugins: [new LedgerSchema(schema)] });
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
  const schema = schemaOf(db);
  const client = await poolOf(db).connect();
  let failed = false;
  try {
    return await fn(boundTo(client, schema), client);
  } catch (err) {
    failed = true;
    throw err;
  } finally {
    client.release(failed);
  }
}
