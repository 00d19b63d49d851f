// The one job catalog. Worker, schedule sync, CLI and dashboard all read this list; adding a
// job is one line here (and its kind's file, when it is a new kind).
import { defineCatalog, type Catalog } from '../schedules/job.js';
import { report } from './report/index.js';
import { salesReportColumns, salesReportQuery } from './sales-report.js';
import { salesSummary } from './sales-summary.js';

export function buildCatalog(): Catalog {
  return defineCatalog([
    salesSummary({
      name: 'sales-hourly',
      description: 'Hourly sales into the per-day summary (the worked example)',
      grid: '1h',
      timezone: 'Europe/Berlin',
      lateness: '5m',
      maxCatchUp: 24,
      seedOrdersPerHour: 40,
    }),
    salesSummary({
      name: 'sales-minutely',
      description: 'The same job on a one-minute grid, so the demo shows ticks at once',
      grid: '1m',
      lateness: '10s',
      maxCatchUp: 10,
    }),
    report({
      name: 'sales-daily-report',
      description: 'Yesterday\'s sales by hour, e-mailed as a table, chart and CSV',
      title: 'Daily sales',
      recipients: ['finance@localhost'],
      grid: 'day',
      timezone: 'Europe/Berlin',
      lateness: '30m',
      maxCatchUp: 7,
      columns: salesReportColumns,
      valueColumn: 'revenue',
      query: salesReportQuery,
    }),
  ]);
}
