// Renders a report: an HTML e-mail with a readable table, totals, the comparison with the
// previous period and a chart, plus the same rows as a CSV attachment.
import { stringify } from 'csv-stringify/sync';
import { REPORT_CHART_WIDTH, reportChartPng, reportChartSize, type ReportChart } from './chart.js';

/**
 * A report column; numeric ones are summed in the totals row and shown with `decimals` places
 * (default 2); `unit` names what a number counts (e.g. "EUR") on the chart's axis.
 */
export interface ReportColumn {
  key: string;
  label: string;
  numeric?: boolean;
  decimals?: number;
  unit?: string;
}
export type ReportRow = Record<string, string | number | null>;

export interface RenderedReport {
  subject: string;
  text: string;
  html: string;
  csv: string;
  chartPng: Buffer;
  /** The chart's size as the HTML shows it (the PNG has twice the pixels, for sharp text). */
  chartSize: { width: number; height: number };
  total: number;
  previousTotal: number;
}

const escape = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const num = (v: unknown) => (v === null || v === undefined || v === '' ? 0 : Number(v));
const fmt = (n: number, decimals = 2) =>
  n.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });

/** "+12.5 %", "-3.0 %", or "n/a" when the previous period had nothing. */
export function change(current: number, previous: number): string {
  if (previous === 0) return 'n/a (nothing in the previous period)';
  const pct = ((current - previous) / Math.abs(previous)) * 100;
  return `${pct >= 0 ? '+' : ''}${pct.toFixed(1)} %`;
}

export function renderReport(r: {
  title: string;
  period: string;
  corrected: boolean;
  columns: readonly ReportColumn[];
  valueColumn: string;
  rows: readonly ReportRow[];
  previousRows: readonly ReportRow[];
  /** The chart's category axis: its name (the zone included) and one label per row. */
  categories: { name: string; labels: readonly string[] };
  /** The numeric columns charted, one chart each (one or two); default the value column. */
  chartColumns?: readonly string[];
}): RenderedReport {
  const numeric = r.columns.filter((c) => c.numeric);
  const totals = Object.fromEntries(
    numeric.map((c) => [c.key, r.rows.reduce((s, row) => s + num(row[c.key]), 0)]),
  );
  const total = totals[r.valueColumn] ?? 0;
  const previousTotal = r.previousRows.reduce((s, row) => s + num(row[r.valueColumn]), 0);
  const mark = r.corrected ? '[corrected] ' : '';
  const subject = `${mark}${r.title} ${r.period}`;
  const valueLabel = r.columns.find((c) => c.key === r.valueColumn)?.label ?? r.valueColumn;
  const comparison = `${valueLabel}: ${fmt(total)} (previous period ${fmt(previousTotal)}, ${change(total, previousTotal)})`;
  const chart: ReportChart = {
    title: subject,
    categoryName: r.categories.name,
    categories: r.categories.labels,
    measures: (r.chartColumns ?? [r.valueColumn]).map((key) => {
      const c = r.columns.find((x) => x.key === key);
      if (!c?.numeric)
        throw new Error(
          `chart: "${key}" is not a numeric column of the report; chart one of ${numeric.map((x) => x.key).join(', ')}`,
        );
      return {
        name: c.label,
        ...(c.unit ? { unit: c.unit } : {}),
        decimals: c.decimals ?? 2,
        values: r.rows.map((row) => num(row[key])),
      };
    }),
  };
  const chartSize = reportChartSize(chart);
  const chartAlt = `Chart of ${chart.measures.map((m) => m.name).join(' and ')} by ${r.categories.name}`;
  const cell = (c: ReportColumn, v: unknown) =>
    c.numeric ? fmt(num(v), c.decimals) : escape(String(v ?? ''));
  const html = [
    '<!doctype html><html><body style="font-family:Arial,sans-serif">',
    `<h2>${escape(subject)}</h2>`,
    r.corrected
      ? '<p><strong>This corrected report replaces the one sent earlier for this period.</strong></p>'
      : '',
    `<p>${escape(comparison)}</p>`,
    `<p><img src="cid:chart" alt="${escape(chartAlt)}" width="${REPORT_CHART_WIDTH}" height="${chartSize.height}"></p>`,
    '<table border="1" cellpadding="4" cellspacing="0" style="border-collapse:collapse">',
    `<thead><tr>${r.columns.map((c) => `<th>${escape(c.label)}</th>`).join('')}</tr></thead>`,
    '<tbody>',
    ...r.rows.map(
      (row) =>
        `<tr>${r.columns.map((c) => `<td${c.numeric ? ' align="right"' : ''}>${cell(c, row[c.key])}</td>`).join('')}</tr>`,
    ),
    '</tbody>',
    `<tfoot><tr>${r.columns.map((c, i) => `<th${c.numeric ? ' align="right"' : ''}>${c.numeric ? fmt(totals[c.key] ?? 0, c.decimals) : i === 0 ? 'Total' : ''}</th>`).join('')}</tr></tfoot>`,
    '</table>',
    '</body></html>',
  ].join('\n');
  const text = [
    subject,
    ...(r.corrected ? ['This corrected report replaces the one sent earlier for this period.'] : []),
    comparison,
    '',
    ...r.rows.map((row) =>
      r.columns
        .map((c) => `${c.label}: ${c.numeric ? fmt(num(row[c.key]), c.decimals) : String(row[c.key] ?? '')}`)
        .join('  '),
    ),
    '',
    `Total ${numeric.map((c) => `${c.label}: ${fmt(totals[c.key] ?? 0, c.decimals)}`).join('  ')}`,
  ].join('\n');
  const csv = stringify([
    r.columns.map((c) => c.label),
    ...r.rows.map((row) => r.columns.map((c) => row[c.key] ?? '')),
  ]);
  return { subject, text, html, csv, chartPng: reportChartPng(chart), chartSize, total, previousTotal };
}
