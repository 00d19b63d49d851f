// Job kind "sales summary": sums each closed window's orders into a per-day summary table,
// in one set-based statement per window, with bad orders set aside in quarantine.
import { sql } from 'kysely';
import { ledger } from '../db/ledger-schema.js';
import { demo, demoTable } from './demo-schema.js';
import type { JobSeeder, JobSpec, WindowContext, WindowCounts } from '../schedules/job.js';

export interface SalesSummaryOptions extends Omit<JobSpec, 'handler' | 'seed' | 'grid'> {
  grid?: string;
  /** Orders per hour the demo seeder writes for the past day; 0 writes none. */
  seedOrdersPerHour?: number;
}

/**
 * One statement: aggregate the window's orders per local day in one pass, add the good ones
 * to their day's row, quarantine the bad ones, and report the three counts. The caller's transaction holds it
 * together with the window's done marker and the watermark.
 */
export async function summariseWindow(ctx: WindowContext): Promise<WindowCounts> {
  const { trx, window, job, generation } = ctx;
  // Its quarantine statement and the previous generation's marker are tidemark's (its schema).
  const t = ledger(ctx.ledger);
  if (generation > 0) {
    // An approved rerun replaces the previous generation's contribution instead of adding twice.
    // The previous generation is the newest one the ledger marks done, not the newest with rows:
    // a generation with no good orders has no rows and contributed zero, so its predecessor's
    // rows were already taken out. None marked done: generation 0, its marker folded into a done
    // span (a rerun's preview does not put it back), since only a done window is rerun.
    await sql`
      with prev as (
        select day, order_count, total from ${demo.sales_window_totals}
         where job = ${job.name} and window_start = ${window.start}
           and generation = coalesce((select max(generation) from ${t.job_windows}
                                       where job = ${job.name} and window_start = ${window.start}
                                         and generation < ${generation} and status = 'done'), 0)
      )
      update ${demo.daily_sales} d set order_count = d.order_count - prev.order_count, total = d.total - prev.total
        from prev where d.job = ${job.name} and d.day = prev.day`.execute(trx);
  }
  const result = await sql<{ input: number; applied: number; quarantined: number }>`
    with agg as (
      select (placed_at at time zone ${job.timezone})::date as day, count(*)::int as n,
             count(*) filter (where amount >= 0)::int as good, coalesce(sum(amount) filter (where amount >= 0), 0) as total
        from ${demo.orders} where placed_at >= ${window.start} and placed_at < ${window.end}
       group by 1
    ), applied as (
      insert into ${demo.daily_sales} (job, day, order_count, total)
      select ${job.name}, day, good, total from agg where good > 0
      on conflict (job, day) do update
        set order_count = daily_sales.order_count + excluded.order_count,
            total = daily_sales.total + excluded.total
      returning 1
    ), contribution as (
      insert into ${demo.sales_window_totals} (job, window_start, generation, day, order_count, total)
      select ${job.name}, ${window.start}, ${generation}, day, good, total from agg where good > 0
      returning 1
    ), bad as (
      -- Read the window again only when the aggregate saw bad orders.
      insert into ${t.quarantine} (job, window_start, generation, record_key, reason, payload)
      select ${job.name}, ${window.start}, ${generation}, order_key,
             case when amount is null then 'amount is missing' else 'amount is negative' end,
             jsonb_build_object('order_key', order_key, 'placed_at', placed_at, 'amount', amount)
        from ${demo.orders}
       where placed_at >= ${window.start} and placed_at < ${window.end} and (amount is null or amount < 0)
         and (select sum(n - good) from agg) > 0
      returning 1
    )
    select coalesce(sum(n), 0)::int as input, coalesce(sum(good), 0)::int as applied,
           (select count(*) from bad)::int as quarantined
      from agg`.execute(trx);
  const row = result.rows[0]!;
  return { input: row.input, applied: row.applied, quarantined: row.quarantined };
}

/** Demo data: a steady stream of orders over the past day, about one in fifty of them bad. */
export function seedOrders(perHour: number): JobSeeder {
  return async (db, { now }) => {
    if (perHour <= 0) return;
    const hourMs = 3_600_000;
    const from = Math.floor(now.getTime() / hourMs) * hourMs - 24 * hourMs;
    const count = 24 * perHour;
    await sql`
      insert into ${demo.orders} (order_key, placed_at, amount)
      select 'demo-' || to_char(ts, 'YYYYMMDD"T"HH24MISS') || '-' || n,
             ts,
             case when n % 50 = 0 then null else round((10 + (n * 7919 % 9000) / 100.0)::numeric, 2) end
        from (select n, to_timestamp(${from / 1000} + n * ${3600 / perHour}) as ts
                from generate_series(0, ${count - 1}) as n) s
      on conflict (order_key) do nothing`.execute(db);
  };
}

export function salesSummary(opts: SalesSummaryOptions): JobSpec {
  const { seedOrdersPerHour = 0, grid = '1h', ...rest } = opts;
  return {
    description: 'Sums closed windows of orders into daily_sales, bad orders to quarantine',
    ...rest,
    grid,
    handler: summariseWindow,
    // What a person reads; sales_window_totals and quarantine are per-generation bookkeeping (a
    // rerun always adds its generation's rows there).
    writes: [{ table: demoTable('daily_sales'), key: ['job', 'day'] }],
    seed: seedOrders(seedOrdersPerHour),
  };
}
