// Job kind "report": a query over each window, sent as an HTML e-mail (table, totals,
// comparison with the previous period, chart) with a CSV attachment, once per window. A rerun
// approved later (a new generation) sends a corrected report, marked as such.
import type { Transaction } from 'kysely';
import { DateTime } from 'luxon';
import type { Database } from '../../db/schema.js';
import type { Job, JobSpec, WindowHandler } from '../../schedules/job.js';
import { windowAt, type Window } from '../../schedules/windows.js';
import { isoUtc } from '../../contract/window-key.js';
import { renderReport, type ReportColumn, type ReportRow } from './render.js';

export interface ReportOptions extends Omit<JobSpec, 'handler' | 'seed'> {
  title: string;
  recipients: string[];
  columns: ReportColumn[];
  /** The numeric column that is compared with the previous period and charted. */
  valueColumn: string;
  /**
   * The chart: `at` names the row field holding each row's start instant (an ISO-8601
   * string), labelled by `step` in the job's zone; `columns` the numeric columns charted (one or
   * two, one chart each; default the value column). Without it each row is labelled by its first column.
   */
  chart?: { at: string; step: 'hour' | 'day'; columns?: string[] };
  /** The report's rows for one window, read inside the ledger transaction. */
  query: (trx: Transaction<Database>, window: Window, job: Job) => Promise<ReportRow[]>;
}

/** How a window is named in a subject: a local date, an ISO week, a month, or the UTC range. */
export function periodLabel(job: Job, w: Window): string {
  const local = DateTime.fromJSDate(w.start, { zone: job.timezone });
  if (job.grid.kind === 'calendar') {
    if (job.grid.unit === 'day') return local.toISODate()!;
    if (job.grid.unit === 'week') return local.toFormat("kkkk-'W'WW");
    return local.toFormat('yyyy-MM');
  }
  return `${isoUtc(w.start)} - ${isoUtc(w.end)}`;
}

/**
 * The chart's category labels: each row's instant in the job's zone (an hour as 13:00, a day as
 * Mon 26 Oct); a local hour that occurs twice (the hour DST repeats) carries its offset.
 */
export function categoriesOf(
  rows: readonly ReportRow[],
  job: Pick<Job, 'timezone'>,
  columns: readonly ReportColumn[],
  chart: ReportOptions['chart'],
): { name: string; labels: string[] } {
  const first = columns[0];
  if (!chart)
    return {
      name: `${first?.label ?? ''} (${job.timezone})`,
      labels: rows.map((row) => String(row[first?.key ?? ''] ?? '')),
    };
  const times = rows.map((row) => {
    const v = row[chart.at];
    const t = DateTime.fromISO(String(v), { setZone: true });
    if (!t.isValid)
      throw new Error(
        `chart.at: row field "${chart.at}" is ${JSON.stringify(v)}, not an instant; put each row's start in it`,
      );
    return t.setZone(job.timezone);
  });
  const format = chart.step === 'hour' ? 'HH:mm' : 'ccc d LLL';
  const plain = times.map((t) => t.toFormat(format));
  const repeated = (label: string) => chart.step === 'hour' && plain.filter((l) => l === label).length > 1;
  return {
    name: `${chart.step === 'hour' ? 'Hour' : 'Day'} (${job.timezone})`,
    labels: times.map((t, i) => (repeated(plain[i]!) ? `${plain[i]} ${t.toFormat('ZZ')}` : plain[i]!)),
  };
}

export function report(opts: ReportOptions): JobSpec {
  const { title, recipients, columns, valueColumn, chart, query, ...spec } = opts;
  const handler: WindowHandler = async (ctx) => {
    const { trx, job, window } = ctx;
    const previous = windowAt(job.grid, job.timezone, new Date(window.start.getTime() - 1));
    const [rows, previousRows] = [await query(trx, window, job), await query(trx, previous, job)];
    const r = renderReport({
      title,
      period: periodLabel(job, window),
      corrected: ctx.generation > 0,
      columns,
      valueColumn,
      rows,
      previousRows,
      categories: categoriesOf(rows, job, columns, chart),
      ...(chart?.columns ? { chartColumns: chart.columns } : {}),
    });
    return {
      input: rows.length,
      applied: rows.length,
      quarantined: 0,
      effects: [
        {
          name: 'report',
          channel: 'email',
          policy: 'ask',
          request: {
            to: recipients,
            subject: r.subject,
            text: r.text,
            html: r.html,
            attachments: [
              {
                filename: 'chart.png',
                contentType: 'image/png',
                contentBase64: r.chartPng.toString('base64'),
                cid: 'chart',
              },
              {
                filename: `${job.name}-${periodLabel(job, window).replace(/[^0-9A-Za-z-]+/g, '_')}.csv`,
                contentType: 'text/csv',
                contentBase64: Buffer.from(r.csv).toString('base64'),
              },
            ],
          },
        },
      ],
    };
  };
  // It writes no table: its preview is the e-mail it would send again.
  return { description: `${title}, e-mailed to ${recipients.join(', ')}`, writes: [], ...spec, handler };
}
