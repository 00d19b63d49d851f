// The hourly sales summary as a user of a job queue would write it: the set-based statement of
// jobs/sales-summary.ts (a window's orders summed per day into daily_sales, bad orders to
// quarantine) run as one statement per job, with no done marker. It leaves out tidemark's rerun
// bookkeeping (sales_window_totals), whose primary key would itself stop a second application.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { DEFAULT_SCHEMA } from '../../db/ledger-schema.js';
import { DEMO_SCHEMA } from '../../jobs/demo-schema.js';

// Named with their schemas, as a job's statement must: the demo's tables, and tidemark's quarantine
// where the bench's test databases keep the ledger (createTestDb: the default schema).
const STATEMENT = `
  with agg as (
    select (placed_at at time zone 'UTC')::date as day, count(*)::int as n,
           count(*) filter (where amount >= 0)::int as good,
           coalesce(sum(amount) filter (where amount >= 0), 0) as total
      from ${DEMO_SCHEMA}.orders where placed_at >= $2::timestamptz and placed_at < $3::timestamptz
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

/** The application's own pool, as a job handler would use it. */
export function peerPool(url: string, max = 20): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

/**
 * Sums one window into daily_sales under `job`. With `holdMs`, the transaction stays open that
 * long after the statement (as the kill test holds tidemark's), so kills land mid-run.
 */
export async function applyWindow(
  pool: pg.Pool,
  job: string,
  start: Date | string,
  end: Date | string,
  holdMs = 0,
): Promise<void> {
  const params = [job, new Date(start).toISOString(), new Date(end).toISOString()];
  if (holdMs <= 0) {
    await pool.query(STATEMENT, params);
    return;
  }
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query(STATEMENT, params);
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
