// The demo report: orders per local hour of the window, with revenue. Bad orders (no or a
// negative amount) are left out, as in the sales summary.
import { sql } from 'kysely';
import { DateTime } from 'luxon';
import { demo } from './demo-schema.js';
import type { ReportOptions } from './report/index.js';

export const salesReportColumns: ReportOptions['columns'] = [
  { key: 'hour', label: 'Hour' },
  { key: 'orders', label: 'Orders', numeric: true, decimals: 0 },
  { key: 'revenue', label: 'Revenue', numeric: true, unit: 'EUR' },
];

/** Orders and revenue per local hour, two charts over the same hours. */
export const salesReportChart: NonNullable<ReportOptions['chart']> = {
  at: 'at',
  step: 'hour',
  columns: ['orders', 'revenue'],
};

/** Hours are grouped in UTC and labelled in local time with the offset, so a 25-hour day has 25 rows. */
export const salesReportQuery: ReportOptions['query'] = async (trx, window, job) => {
  const result = await sql<{ hour: Date; orders: number; revenue: string }>`
    select date_trunc('hour', placed_at) as hour, count(*)::int as orders, sum(amount)::numeric(16, 2)::text as revenue
      from ${demo.orders}
     where placed_at >= ${window.start} and placed_at < ${window.end} and amount >= 0
     group by 1 order by 1`.execute(trx);
  return result.rows.map((r) => ({
    ...r,
    // The hour's start instant, for the chart's labels; the table and the CSV show `hour`.
    at: r.hour.toISOString(),
    hour: DateTime.fromJSDate(r.hour, { zone: job.timezone }).toFormat('yyyy-MM-dd HH:mm ZZ'),
  }));
};
