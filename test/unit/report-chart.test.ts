// The report e-mail's chart: its option and the SVG the same option draws (title, axis names with
// units, category labels in the job's zone, a value on every bar), and the PNG the e-mail carries.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DateTime } from 'luxon';
import { chartSvg } from '../../charts/render.js';
import { reportChartOption, reportChartSize, type ReportChart } from '../../jobs/report/chart.js';
import { categoriesOf } from '../../jobs/report/index.js';
import { renderReport } from '../../jobs/report/render.js';
import { salesReportChart, salesReportColumns } from '../../jobs/sales-report.js';

const zone = 'Europe/Berlin';
/** The 25 hours of 2026-10-25 in Berlin (02:00 twice), with orders and revenue per hour. */
const rows = Array.from({ length: 25 }, (_, i) => {
  const at = new Date(Date.UTC(2026, 9, 24, 22 + i));
  return {
    hour: DateTime.fromJSDate(at, { zone }).toFormat('yyyy-MM-dd HH:mm ZZ'),
    orders: 30 + (i % 7),
    revenue: (2000 + i * 13.25).toFixed(2),
    at: at.toISOString(),
  };
});
const pngSize = (png: Buffer) => ({ width: png.readUInt32BE(16), height: png.readUInt32BE(20) });

test("category labels are the rows' hours in the job's zone; the hour DST repeats carries its offset", () => {
  const c = categoriesOf(rows, { timezone: zone }, salesReportColumns, salesReportChart);
  assert.equal(c.name, 'Hour (Europe/Berlin)');
  assert.equal(c.labels.length, 25);
  assert.deepEqual(c.labels.slice(0, 5), ['00:00', '01:00', '02:00 +02:00', '02:00 +01:00', '03:00']);
  assert.equal(c.labels.at(-1), '23:00');
  assert.deepEqual(
    categoriesOf(
      [{ at: '2026-10-25T04:00:00Z' }, { at: '2026-10-26T04:00:00Z' }],
      { timezone: 'America/New_York' },
      salesReportColumns,
      { ...salesReportChart, step: 'day' },
    ),
    { name: 'Day (America/New_York)', labels: ['Sun 25 Oct', 'Mon 26 Oct'] },
  );
  assert.throws(
    () => categoriesOf([{ at: 'soon' }], { timezone: zone }, salesReportColumns, salesReportChart),
    /chart\.at: row field "at" is "soon", not an instant/,
  );
});

test('the chart has a title, named axes with units, every category label and every value', () => {
  const c = categoriesOf(rows, { timezone: zone }, salesReportColumns, salesReportChart);
  const chart: ReportChart = {
    title: 'Daily sales 2026-10-25',
    categoryName: c.name,
    categories: c.labels,
    measures: [
      { name: 'Orders', decimals: 0, values: rows.map((r) => r.orders) },
      { name: 'Revenue', unit: 'EUR', decimals: 2, values: rows.map((r) => Number(r.revenue)) },
    ],
  };
  const option = reportChartOption(chart) as {
    xAxis: { name: string; data: string[] }[];
    yAxis: { name: string; max: number; interval: number }[];
    series: { type: string; data: number[] }[];
  };
  assert.deepEqual(
    option.xAxis.map((x) => x.name),
    ['Hour (Europe/Berlin)', 'Hour (Europe/Berlin)'],
  );
  assert.deepEqual(
    option.yAxis.map((y) => y.name),
    ['Orders', 'Revenue (EUR)'],
  );
  for (const y of option.yAxis) assert.equal(y.max % y.interval, 0, 'the value axis ends on a tick');
  assert.ok(
    option.yAxis[0]!.max > 36 && Number.isInteger(option.yAxis[0]!.interval),
    'whole steps of orders',
  );
  assert.deepEqual(
    option.series.map((s) => s.data.length),
    [25, 25],
  );

  const svg = chartSvg(reportChartOption(chart), reportChartSize(chart));
  const texts = [...svg.matchAll(/<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]!);
  for (const expected of ['Daily sales 2026-10-25', 'Hour (Europe/Berlin)', 'Orders', 'Revenue (EUR)'])
    assert.ok(texts.includes(expected), `"${expected}" drawn`);
  for (const label of c.labels)
    assert.equal(texts.filter((t) => t === label).length, 2, `category "${label}" under both charts`);
  for (const r of rows) {
    assert.ok(texts.includes(String(r.orders)), `orders ${r.orders} on a bar`);
    const value = Number(r.revenue).toLocaleString('en-US', { minimumFractionDigits: 2 });
    assert.ok(texts.includes(value), `revenue ${value} on its bar`);
  }
  assert.ok(texts.includes('0'), 'value axes start at 0');
});

test('the report shows the chart inline at its size, from a PNG with twice the pixels', () => {
  const c = categoriesOf(rows, { timezone: zone }, salesReportColumns, salesReportChart);
  const r = renderReport({
    title: 'Daily sales',
    period: '2026-10-25',
    corrected: false,
    columns: salesReportColumns,
    valueColumn: 'revenue',
    rows,
    previousRows: [],
    categories: c,
    chartColumns: ['orders', 'revenue'],
  });
  assert.deepEqual(pngSize(r.chartPng), { width: 2 * r.chartSize.width, height: 2 * r.chartSize.height });
  assert.equal(r.chartSize.width, 640, 'as wide as an e-mail reads comfortably');
  assert.match(
    r.html,
    new RegExp(
      `<img src="cid:chart" alt="Chart of Orders and Revenue by Hour \\(Europe/Berlin\\)" width="640" height="${r.chartSize.height}">`,
    ),
  );
  assert.throws(
    () =>
      renderReport({
        title: 't',
        period: 'p',
        corrected: false,
        columns: salesReportColumns,
        valueColumn: 'revenue',
        rows,
        previousRows: [],
        categories: c,
        chartColumns: ['hour'],
      }),
    /chart: "hour" is not a numeric column of the report; chart one of orders, revenue/,
  );
});
