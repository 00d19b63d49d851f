// The report job kind end to end on the real server: the mail a real SMTP server received,
// its figures checked against an independent computation; once per window; corrected on rerun.
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'csv-parse/sync';
import { DateTime } from 'luxon';
import { report } from '../../../../jobs/report/index.js';
import { salesReportChart, salesReportColumns, salesReportQuery } from '../../../../jobs/sales-report.js';
import { defineCatalog } from '../../../../schedules/define.js';
import type { WindowRunResult } from '../../../../contract/workflows.js';
import { startChat, type TestChat } from '../../../helpers/chat.js';
import { depsWithChannels } from '../../../helpers/effects.js';
import { insertOrders, ordersBetween, type Order } from '../../../helpers/jobs.js';
import { startSmtp, type TestSmtp } from '../../../helpers/smtp.js';
import { realStack, uniqueQueue, withWorker } from '../../../helpers/temporal.js';
import { DEMO_SCHEMA } from '../../../../jobs/demo-schema.js';

const stack = realStack();
let smtp: TestSmtp;
let chat: TestChat;
before(async () => {
  [smtp, chat] = await Promise.all([startSmtp({ requireAuth: true }), startChat()]);
});
after(async () => {
  await smtp?.close();
  await chat?.close();
});

const zone = 'Europe/Berlin';
// 2026-10-25 is the 25-hour day in Berlin: [2026-10-24T22:00Z, 2026-10-25T23:00Z).
const day = { start: '2026-10-24T22:00:00Z', end: '2026-10-25T23:00:00Z' };
const previousDay = { start: '2026-10-23T22:00:00Z', end: '2026-10-24T22:00:00Z' };

/** What the report must say, computed from the inserted orders in JavaScript. */
function expected(orders: Order[], from: string, to: string) {
  const byHour = new Map<string, { orders: number; cents: number }>();
  for (const o of orders) {
    if (
      o.at < new Date(from).toISOString() ||
      o.at >= new Date(to).toISOString() ||
      o.amount === null ||
      o.amount < 0
    )
      continue;
    const hour = DateTime.fromISO(o.at, { zone }).startOf('hour').toFormat('yyyy-MM-dd HH:mm ZZ');
    const h = byHour.get(hour) ?? { orders: 0, cents: 0 };
    h.orders++;
    h.cents += Math.round(o.amount * 100);
    byHour.set(hour, h);
  }
  const rows = [...byHour.entries()]
    .sort(
      ([a], [b]) =>
        DateTime.fromFormat(a, 'yyyy-MM-dd HH:mm ZZ').toMillis() -
        DateTime.fromFormat(b, 'yyyy-MM-dd HH:mm ZZ').toMillis(),
    )
    .map(([hour, v]) => [hour, String(v.orders), (v.cents / 100).toFixed(2)]);
  return { rows, cents: [...byHour.values()].reduce((s, v) => s + v.cents, 0) };
}

test('a daily report: HTML table, totals, comparison, chart and CSV, sent once; a rerun sends a corrected one', async () => {
  const job = 'daily-report';
  const orders = await insertOrders(stack.t.db, [
    ...ordersBetween('prev', previousDay.start, previousDay.end, 96, 20),
    ...ordersBetween('cur', day.start, day.end, 150, 25),
  ]);
  const catalog = defineCatalog([
    report({
      name: job,
      title: 'Daily sales',
      recipients: ['finance@example.test', 'ceo@example.test'],
      grid: 'day',
      timezone: zone,
      start: day.start,
      columns: salesReportColumns,
      valueColumn: 'revenue',
      chart: salesReportChart,
      query: salesReportQuery,
    }),
  ]);
  const taskQueue = uniqueQueue(job);
  const key = `${job}/2026-10-24T22:00:00Z`;
  const before = smtp.messages.length;
  const policy = {
    retry: { maximumAttempts: 2, initialInterval: '100ms', maximumInterval: '100ms', backoffCoefficient: 1 },
    startToCloseTimeoutMs: 20_000,
    effectTimeoutMs: 10_000,
  };
  const run = (generation: number) =>
    stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId: generation ? `${key}#${generation}` : key,
      args: [
        {
          job,
          start: day.start,
          end: day.end,
          generation,
          key: generation ? `${key}#${generation}` : key,
          trigger: 'manual',
          policy,
        },
      ],
    }) as Promise<WindowRunResult>;

  await withWorker(stack.env, taskQueue, depsWithChannels(stack.t.db, catalog, smtp, chat), async () => {
    assert.equal((await run(0)).effectOutcomes[0]?.outcome, 'done');
    assert.equal((await run(0)).outcome, 'already-done');
    assert.equal(smtp.messages.length - before, 1, 'one report for the window, however often it runs');

    const mail = smtp.messages.at(-1)!;
    assert.equal(mail.subject, 'Daily sales 2026-10-25');
    assert.deepEqual(
      (Array.isArray(mail.to) ? mail.to : [mail.to]).flatMap((t) => t!.value.map((v) => v.address)),
      ['finance@example.test', 'ceo@example.test'],
    );
    const cur = expected(orders, day.start, day.end);
    const prev = expected(orders, previousDay.start, previousDay.end);
    assert.equal(cur.rows.length, 25, 'a row for each of the 25 local hours');
    const csvFile = mail.attachments.find((a) => a.contentType === 'text/csv')!;
    assert.equal(csvFile.filename, 'daily-report-2026-10-25.csv');
    assert.notEqual(csvFile.contentDisposition, 'inline', 'the CSV stays an attachment');
    assert.deepEqual(parse(csvFile.content.toString('utf8')), [['Hour', 'Orders', 'Revenue'], ...cur.rows]);
    const total = (cur.cents / 100).toLocaleString('en-US', { minimumFractionDigits: 2 });
    const pct = (((cur.cents - prev.cents) / prev.cents) * 100).toFixed(1);
    assert.ok(
      mail.html &&
        mail.html.includes(
          `Revenue: ${total} (previous period ${(prev.cents / 100).toLocaleString('en-US', { minimumFractionDigits: 2 })}, ${cur.cents >= prev.cents ? '+' : ''}${pct} %)`,
        ),
      String(mail.html).slice(0, 600),
    );
    assert.match(
      String(mail.html),
      new RegExp(
        `<th>Total</th><th align="right">${cur.rows.reduce((s, r) => s + Number(r[1]), 0)}</th><th align="right">${total.replace('.', '\\.')}</th>`,
      ),
    );
    const chart = mail.attachments.find((a) => a.contentType === 'image/png')!;
    assert.equal(chart.contentId, '<chart>');
    assert.equal(chart.related, true, 'the chart is part of the HTML (multipart/related), not a download');
    assert.deepEqual([...chart.content.subarray(1, 4)].map((b) => String.fromCharCode(b)).join(''), 'PNG');
    // mailparser inlines the cid-linked image: the HTML shows the attached chart, at the size it
    // was drawn for (two charts of 25 upright hour labels), from a PNG with twice the pixels.
    assert.ok(
      String(mail.html).includes(`<img src="data:image/png;base64,${chart.content.toString('base64')}"`),
      'the HTML shows the inline chart',
    );
    const img =
      /<img src="data:image\/png;base64,[^"]+" alt="Chart of Orders and Revenue by Hour \(Europe\/Berlin\)" width="(\d+)" height="(\d+)">/.exec(
        String(mail.html),
      );
    assert.ok(img, 'the chart has its alt text and size');
    const [width, height] = [Number(img[1]), Number(img[2])];
    assert.equal(width, 640);
    assert.ok(height >= 500 && height <= 900, `height ${height}: two charts, readable without scrolling far`);
    assert.deepEqual(
      [chart.content.readUInt32BE(16), chart.content.readUInt32BE(20)],
      [2 * width, 2 * height],
      'PNG pixels twice the shown size',
    );
    mkdirSync('test-artifacts', { recursive: true });
    writeFileSync(join('test-artifacts', 'report-chart.png'), chart.content);

    // An approved rerun (generation 1) after a late correction of the data: a corrected report.
    await stack.t.db
      .withSchema(DEMO_SCHEMA)
      .insertInto('orders')
      .values({ order_key: 'late-fix', placed_at: '2026-10-25T10:30:00Z', amount: 1000 })
      .execute();
    assert.equal((await run(1)).effectOutcomes[0]?.outcome, 'done');
    assert.equal(smtp.messages.length - before, 2);
    const corrected = smtp.messages.at(-1)!;
    assert.equal(corrected.subject, '[corrected] Daily sales 2026-10-25');
    assert.match(String(corrected.html), /This corrected report replaces the one sent earlier/);
    assert.match(
      String(corrected.html),
      new RegExp(
        `Revenue: ${((cur.cents + 100_000) / 100).toLocaleString('en-US', { minimumFractionDigits: 2 }).replace('.', '\\.')}`,
      ),
    );
  });
});
