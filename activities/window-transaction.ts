// The window's transaction: the claim with its attempt's bounds, then the job's handler, its
// counts and effects checked, all on one connection of the window's own.
import type { Transaction } from 'kysely';
import type pg from 'pg';
import { FAILURE } from '../contract/failures.js';
import type { WindowInput } from '../contract/workflows.js';
import { sealedTransaction, withConnection } from '../db/connection.js';
import { copyRows } from '../db/copy.js';
import {
  claimWindow,
  claimWindows,
  quarantineRecords,
  type TransactionBound,
  type WindowRef,
} from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import type { WindowContext, WindowCounts } from '../schedules/job.js';
import { activityContext } from './context.js';
import type { ActivityDeps } from './deps.js';
import { checkWindowEffects } from './effect-input.js';
import { badInput } from './errors.js';

/**
 * Bounds the window transaction by its attempt's timeout, on the server (set with the claim). A
 * lock wait ends with the attempt: an attempt behind another host's transaction on the window's
 * row (that host cut off between statements) would otherwise wait past its attempt, Temporal's
 * retries piling up behind it, each holding a pooled connection until the pool is empty. So does
 * a statement (statement_timeout): a runaway query would hold the window's locks past its attempt. A
 * transaction left idle for two attempts and 5 s is ended by the server: a host that went silent
 * (a partition sends no FIN, and TCP keepalive waits ~2 h by default) frees the row for the retry;
 * a slow attempt that outlives its own timeout by less may still commit (a retry then finds the
 * window done).
 */
function boundByAttempt(attemptMs: number): TransactionBound | undefined {
  if (!(attemptMs > 0)) return undefined;
  // The server refuses a longer timeout (an int of ms, ~24.8 days): capped, or no window of a job
  // whose attempts may run ~12.4 days or more could be claimed.
  const cap = (ms: number) => Math.min(ms, PG_MAX_TIMEOUT_MS);
  return { lockTimeoutMs: cap(attemptMs), idleTimeoutMs: cap(2 * attemptMs + IDLE_MARGIN_MS) };
}

const IDLE_MARGIN_MS = 5_000;
const PG_MAX_TIMEOUT_MS = 2_147_483_647;

/**
 * The transaction as a handler gets it: `trx` on the job author's names (no ledger schema put in
 * front of them, so a table of theirs named like one of tidemark's stays theirs), `ledger` on
 * tidemark's own tables, and the quarantine of this window.
 */
export function handlerTransaction(
  trx: Transaction<Database>,
  w: Pick<WindowRef, 'job' | 'start' | 'generation'>,
): Pick<WindowContext, 'trx' | 'ledger' | 'quarantine' | 'signal'> {
  return {
    trx: trx.withoutPlugins(),
    ledger: trx,
    quarantine: (records) => quarantineRecords(trx, w, records),
    // The attempt's own (cancelled, timed out, worker shutting down); never aborted outside an activity.
    signal: activityContext()?.cancellationSignal ?? new AbortController().signal,
  };
}

/** Thrown by the preview with what it saw: the window's transaction rolls back, and this is its result. */
export class RolledBack<T> extends Error {
  constructor(readonly value: T) {
    super('rolled back: a preview never commits');
  }
}

/**
 * The window's transaction, on a connection of its own (so that the handler may COPY inside it):
 * the claim first, carrying the attempt's bounds (lock, statement and idle timeouts), then `body`,
 * which runs the handler through `runHandler` (its counts and effects checked). The real run
 * commits with its last statement; the preview throws to roll back. Null: the window is done.
 */
export async function inWindowTransaction<T>(
  deps: ActivityDeps,
  w: WindowRef,
  input: WindowInput,
  meta: { trigger: string; workflowId: string | null; at: Date },
  attempt: number,
  log: (line: string) => void,
  body: (trx: Transaction<Database>, attempts: number, runHandler: () => Promise<WindowCounts>) => Promise<T>,
): Promise<T | null> {
  let windowOpen = true;
  return await withConnection(deps.db, (conn, client) =>
    conn.transaction().execute(async (trx) => {
      const attempts = await claimWindow(trx, w, meta, boundByAttempt(input.policy.startToCloseTimeoutMs));
      if (attempts === undefined) return null;
      return await body(
        trx,
        attempts,
        handlerRunner(deps, { trx, client }, w, input.policy, attempt, log, () => windowOpen),
      );
    }),
  )
    .catch(rolledBackValue<T>)
    .finally(() => (windowOpen = false));
}

/**
 * A group of one job's windows in one transaction, on a connection of its own: the claims of all of
 * them first (one statement, carrying BEGIN and the attempt's bounds), then `body`, which runs
 * each claimed window's handler through `runHandler` and ends with the group's finish (carrying
 * the COMMIT). A failure anywhere rolls the whole group back.
 */
export async function inGroupTransaction<T>(
  deps: ActivityDeps,
  ws: readonly WindowRef[],
  policy: WindowInput['policy'],
  meta: { trigger: string; workflowId: string | null; at: Date },
  attempt: number,
  log: (line: string) => void,
  body: (
    trx: Transaction<Database>,
    claimed: ReadonlyMap<string, number>,
    runHandler: (w: WindowRef) => Promise<WindowCounts>,
  ) => Promise<T>,
): Promise<T> {
  let groupOpen = true;
  return await withConnection(deps.db, (conn, client) =>
    conn.transaction().execute(async (trx) => {
      const claimed = await claimWindows(trx, ws, meta, boundByAttempt(policy.startToCloseTimeoutMs));
      return await body(trx, claimed, (w) =>
        handlerRunner(deps, { trx, client }, w, policy, attempt, log, () => groupOpen)(),
      );
    }),
  ).finally(() => (groupOpen = false));
}

/**
 * Runs the job's handler for window `w` inside the transaction held on `client`, and checks what it
 * returns: its counts add up, its effects are well formed.
 */
function handlerRunner(
  deps: ActivityDeps,
  held: { trx: Transaction<Database>; client: pg.PoolClient },
  w: WindowRef,
  policy: WindowInput['policy'],
  attempt: number,
  log: (line: string) => void,
  isOpen: () => boolean,
): () => Promise<WindowCounts> {
  const { trx, client } = held;
  const job = deps.catalog.get(w.job);
  return async () => {
    const counts = await sealedTransaction(client, () =>
      job.handler({
        ...handlerTransaction(trx, w),
        job,
        window: { start: w.start, end: w.end },
        key: w.key,
        generation: w.generation,
        attempt,
        log,
        // COPY goes to the client, past kysely's guards: outside the window's transaction (ended
        // by a handler's own COMMIT or ROLLBACK, or ctx kept past the handler) it would commit
        // on its own, or inside whichever transaction the pooled client serves next.
        copyRows: async (table, columns, rows) => {
          if (!isOpen() || client.getTransactionStatus() === 'I') {
            throw new Error(
              `copyRows into ${table} outside window ${w.key}'s transaction: nothing was copied`,
            );
          }
          return await copyRows(client, table, columns, rows);
        },
      }),
    );
    if (counts.applied + counts.quarantined !== counts.input) {
      throw badInput(
        FAILURE.countMismatch,
        `job "${job.name}" window ${w.key}: applied ${counts.applied} + quarantined ${counts.quarantined} != input ${counts.input}; nothing was committed`,
      );
    }
    // External effects are recorded with the window (an outbox) and performed after the commit.
    checkWindowEffects(job.name, w.key, counts.effects ?? [], policy.retry);
    return counts;
  };
}

/**
 * The preview's way out: kysely rolled the transaction back, and the connection was closed rather
 * than pooled again (whatever the handler left on its session, an advisory lock or a prepared
 * statement, goes with it).
 */
function rolledBackValue<T>(err: unknown): T {
  if (err instanceof RolledBack) return err.value as T;
  throw err;
}
