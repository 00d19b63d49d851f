// Test jobs and data: the sales summary with a gate that holds chosen windows open.
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { summariseWindow } from '../../jobs/sales-summary.js';
import type { JobSpec, WindowHandler } from '../../schedules/job.js';
import { DEMO_SCHEMA, demoTable } from '../../jobs/demo-schema.js';

/** A gate: `hold(key)` makes that window's handler wait until `release(key)`. */
export function gatedHandler(inner: WindowHandler = summariseWindow) {
  const held = new Map<string, { promise: Promise<void>; open: () => void; entered: boolean }>();
  const handler: WindowHandler = async (ctx) => {
    const gate = held.get(ctx.key);
    if (gate) {
      gate.entered = true;
      await gate.promise;
    }
    return await inner(ctx);
  };
  return {
    handler,
    hold(key: string) {
      let open!: () => void;
      const promise = new Promise<void>((r) => (open = r));
      held.set(key, { promise, open, entered: false });
    },
    entered: (key: string) => held.get(key)?.entered ?? false,
    release(key: string) {
      held.get(key)?.open();
      held.delete(key);
    },
  };
}

export function salesJob(name: string, extra: Partial<JobSpec> = {}): JobSpec {
  return {
    name,
    grid: '1h',
    timezone: 'UTC',
    lateness: '5m',
    handler: summariseWindow,
    // As the sales-summary kind declares it (the rerun preview compares it).
    writes: [{ table: demoTable('daily_sales'), key: ['job', 'day'] }],
    ...extra,
  };
}

export interface Order {
  key: string;
  at: string;
  amount: number | null;
}

/** Inserts orders; returns them for an independent reference computation. */
export async function insertOrders(db: Kysely<Database>, orders: Order[]): Promise<Order[]> {
  if (orders.length > 0) {
    await db
      .withSchema(DEMO_SCHEMA)
      .insertInto('orders')
      .values(orders.map((o) => ({ order_key: o.key, placed_at: o.at, amount: o.amount })))
      .execute();
  }
  return orders;
}

/** `n` orders spread evenly over [from, to), every `badEvery`-th with no amount. */
export function ordersBetween(prefix: string, from: string, to: string, n: number, badEvery = 0): Order[] {
  const a = new Date(from).getTime();
  const step = (new Date(to).getTime() - a) / n;
  return Array.from({ length: n }, (_, i) => ({
    key: `${prefix}-${i}`,
    at: new Date(a + Math.floor(i * step)).toISOString(),
    amount:
      badEvery > 0 && i % badEvery === badEvery - 1
        ? null
        : Math.round((5 + ((i * 37) % 200)) * 100 + 7) / 100,
  }));
}

/** The reference: what the summary must hold for orders in [from, to), computed in JS. */
export function reference(
  orders: Order[],
  from: string,
  to: string,
): { count: number; totalCents: number; bad: number } {
  const inRange = orders.filter(
    (o) => o.at >= new Date(from).toISOString() && o.at < new Date(to).toISOString(),
  );
  const good = inRange.filter((o) => o.amount !== null && o.amount >= 0);
  return {
    count: good.length,
    totalCents: good.reduce((s, o) => s + Math.round(o.amount! * 100), 0),
    bad: inRange.length - good.length,
  };
}

export async function summaryOf(
  db: Kysely<Database>,
  job: string,
): Promise<{ count: number; totalCents: number }> {
  const rows = await db
    .withSchema(DEMO_SCHEMA)
    .selectFrom('daily_sales')
    .select(['order_count', 'total'])
    .where('job', '=', job)
    .execute();
  return {
    count: rows.reduce((s, r) => s + r.order_count, 0),
    totalCents: rows.reduce((s, r) => s + Math.round(Number(r.total) * 100), 0),
  };
}
