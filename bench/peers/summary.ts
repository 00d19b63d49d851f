// The hourly sales summary as a user of a job queue would write it: the set-based statement of
// jobs/sales-summary.ts (a window's orders summed per day into daily_sales, bad orders to
// quarantine), in two forms:
//  - careful: what the queues' own docs lead a careful user to (graphile-worker: "jobs should be
//    idempotent"; pg-boss: at-least-once delivery): a done-marker row keyed by the window, written
//    in the same transaction as the summary, which runs only when the marker is new; the marker's
//    primary key makes a second delivery wait for the first and then do nothing. Written the
//    fastest way: the marker a step of the summary's own statement (one round trip, as the naive
//    handler), not begin / insert / summary / commit (four);
//  - naive: the statement alone, autocommitted, no marker.
// Both leave out tidemark's rerun bookkeeping (sales_window_totals).
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { DEFAULT_SCHEMA } from '../../db/ledger-schema.js';
import { DEMO_SCHEMA } from '../../jobs/demo-schema.js';

// Named with their schemas, as a job's statement must: the demo's tables, and tidemark's quarantine
// where the bench's test databases keep the ledger (createTestDb: the default schema).
/** The done markers of the careful handler: one row per job and window. */
export const MARKERS = `${DEMO_SCHEMA}.peer_windows_done`;
export const CREATE_MARKERS = `create table if not exists ${MARKERS} (
  job text not null, window_start timestamptz not null, primary key (job, window_start))`;

/**
 * The summary of one window ($1 job, $2 start, $3 end). `marked`: its first step inserts the
 * window's done marker, and it sums only when that marker is new (one statement, one transaction;
 * a second delivery waits on the marker's key, then applies nothing).
 */
const statement = (marked: boolean) => `
  with ${
    marked
      ? `mark as (
    insert into ${MARKERS} (job, window_start) values ($1::text, $2::timestamptz)
    on conflict do nothing returning 1
  ), `
      : ''
  }agg as (
    select (placed_at at time zone 'UTC')::date as day, count(*)::int as n,
           count(*) filter (where amount >= 0)::int as good,
           coalesce(sum(amount) filter (where amount >= 0), 0) as total
      from ${DEMO_SCHEMA}.orders where placed_at >= $2::timestamptz and placed_at < $3::timestamptz${
        marked ? '\n       and exists (select 1 from mark)' : ''
      }
     group by 1
  ), applied as (
    insert into ${DEMO_SCHEMA}.daily_sales (job, day, order_count, total)
    select $1::text, day, good, total from agg where good > 0
    on conflict (job, day) do update
      set order_count = daily_sales.order_count + excluded.order_count,
          total = daily_sales.total + excluded.total
    returning 1
  ), bad as (
    insert into ${DEFAULT_SCHEMA}.quarantine (job, window_start, generation, record_key, reason, payload)
    select $1::text, $2::timestamptz, 0, order_key,
           case when amount is null then 'amount is missing' else 'amount is negative' end,
           jsonb_build_object('order_key', order_key, 'placed_at', placed_at, 'amount', amount)
      from ${DEMO_SCHEMA}.orders
     where placed_at >= $2::timestamptz and placed_at < $3::timestamptz and (amount is null or amount < 0)
       and (select sum(n - good) from agg) > 0
    returning 1
  )
  select coalesce(sum(n), 0)::int as input from agg`;
const CAREFUL = statement(true);
const NAIVE = statement(false);

export type Handler = 'careful' | 'naive';
export const HANDLERS: readonly Handler[] = ['careful', 'naive'];

/** The application's own pool, as a job handler would use it. */
export function peerPool(url: string, max = 20): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Sums one window into daily_sales under `job`, the `handler` way: one statement, autocommitted.
 * With `holdMs`, in a transaction that stays open that long after the statement (as the kill test
 * holds tidemark's), so kills land mid-run.
 */
export async function applyWindow(
  pool: pg.Pool,
  job: string,
  start: Date | string,
  end: Date | string,
  holdMs = 0,
  handler: Handler = 'careful',
): Promise<void> {
  const text = handler === 'careful' ? CAREFUL : NAIVE;
  const params = [job, new Date(start).toISOString(), new Date(end).toISOString()];
  if (holdMs <= 0) {
    await pool.query(text, params);
    return;
  }
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(text, params);
    await sleep(holdMs);
    await client.query('commit');
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** A window's job payload, the same for both peers. */
export interface WindowPayload {
  start: string;
  end: string;
}
