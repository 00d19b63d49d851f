// What the page's overview adds to `jobsOverview`: the schedule in words next to the spec the
// Temporal Schedule really has (cron or interval), and a health summary of the job's windows
// (done / failed / running / missing), like a partition view's counts.
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import { readWatermark } from '../db/ledger.js';
import { ledger } from '../db/ledger-schema.js';
import type { Database } from '../db/schema.js';
import { formatDuration } from '../schedules/duration.js';
import type { Catalog, Job, Tick } from '../schedules/job.js';
import { jobsOverview } from './overview.js';
import { windowAt, windowStartAt, windowsInRange } from '../schedules/windows.js';
import { SA_JOB, SA_KIND } from '../contract/search-attributes.js';

/** Counting missing windows stops here: past it the page says "more than". */
export const MISSING_CAP = 100_000;

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const two = (n: string) => n.padStart(2, '0');
const ordinal = (n: number) =>
  `${n}${n % 10 === 1 && n !== 11 ? 'st' : n % 10 === 2 && n !== 12 ? 'nd' : n % 10 === 3 && n !== 13 ? 'rd' : 'th'}`;

/** Words for the common cron shapes; null for anything else (the expression is shown either way). */
export function cronWords(cron: string): string | null {
  const f = cron.trim().split(/\s+/);
  if (f.length !== 5) return null;
  const [min, hour, dom, mon, dow] = f as [string, string, string, string, string];
  const num = /^\d+$/;
  if (!num.test(min) || mon !== '*') return null;
  if (hour === '*' && dom === '*' && dow === '*') return `every hour at :${two(min)}`;
  const step = /^\*\/(\d+)$/.exec(hour);
  if (step && dom === '*' && dow === '*') return `every ${step[1]} hours at :${two(min)}`;
  if (!num.test(hour)) return null;
  const at = `${two(hour)}:${two(min)}`;
  if (dom === '*' && dow === '*') return `every day at ${at}`;
  if (dom === '*' && /^[0-7]$/.test(dow)) return `every ${DAYS[Number(dow) % 7]} at ${at}`;
  if (dom === '*' && dow === '1-5') return `every weekday at ${at}`;
  if (num.test(dom) && dow === '*') return `on the ${ordinal(Number(dom))} of every month at ${at}`;
  return null;
}

function intervalWords(everyMs: number, offsetMs: number): string {
  const every =
    everyMs === 60_000
      ? 'every minute'
      : everyMs === 3_600_000
        ? 'every hour'
        : `every ${formatDuration(everyMs)}`;
  return offsetMs ? `${every}, ${formatDuration(offsetMs)} after each boundary` : every;
}

/** The schedule as a person reads it, and as the Temporal Schedule's spec holds it. */
export function scheduleOf(tick: Tick): { words: string; spec: string; timezone: string } {
  if (tick.kind === 'cron')
    return {
      words: `${cronWords(tick.cron) ?? `cron "${tick.cron}"`} (${tick.timezone})`,
      spec: `cron ${tick.cron}`,
      timezone: tick.timezone,
    };
  return {
    words: `${intervalWords(tick.everyMs, tick.offsetMs)} (UTC)`,
    spec: `interval every ${formatDuration(tick.everyMs)}${tick.offsetMs ? ` offset ${formatDuration(tick.offsetMs)}` : ''}`,
    timezone: 'UTC',
  };
}

export interface JobHealth {
  done: number;
  failed: number;
  /** Window workflows of the job running now (Temporal's count). */
  running: number;
  /** Closed windows since the job's first window with no ledger row at all. */
  missing: number;
  /** Counting stopped at MISSING_CAP. */
  missingCapped: boolean;
}

/**
 * Counts the job's spans added or removed (other than by compaction or expansion) that migration
 * 20261201T2300 left to be counted by the grid (the database does not know it), once: the rows are
 * taken (deleted) and counted in one transaction.
 */
async function countSpanBacklog(db: Kysely<Database>, job: Job): Promise<void> {
  const any = await db
    .selectFrom('job_span_backlog')
    .select('span_start')
    .where('job', '=', job.name)
    .limit(1)
    .executeTakeFirst();
  if (!any) return;
  await db.transaction().execute(async (trx) => {
    const spans = await trx
      .deleteFrom('job_span_backlog')
      .where('job', '=', job.name)
      .returning(['span_start', 'span_end', 'sign'])
      .execute();
    const n = spans.reduce(
      (sum, s) =>
        sum +
        s.sign *
          (job.grid.kind === 'fixed'
            ? Math.round((s.span_end.getTime() - s.span_start.getTime()) / job.grid.ms)
            : windowsInRange(job.grid, job.timezone, s.span_start, s.span_end).length),
      0,
    );
    if (n !== 0)
      await trx.insertInto('job_window_counts').values({ job: job.name, status: 'done', n }).execute();
  });
}

/**
 * Counts over each window's latest generation (windows folded into spans are done), plus the
 * closed windows nothing has recorded. Reads the counts kept as windows change (job_window_counts,
 * migration 20261201T2000) and a few index probes: the same cost on years of history as on a day.
 */
export async function jobHealth(
  db: Kysely<Database>,
  client: Client,
  job: Job,
  now: Date,
): Promise<JobHealth> {
  await countSpanBacklog(db, job);
  const counts = await db
    .selectFrom('job_window_counts')
    .select(['status', sql<string>`sum(n)`.as('n')])
    .where('job', '=', job.name)
    .groupBy('status')
    .execute();
  const by = (s: string) => Number(counts.find((r) => r.status === s)?.n ?? 0);
  // Windows recorded: rows of any generation or a span's, one each.
  const recorded = counts.reduce((n, r) => n + Number(r.n), 0);
  const t = ledger(db);
  const firsts = await sql<{ first: Date | null }>`
    select least((select min(window_start) from ${t.job_windows} where job = ${job.name}),
                 (select min(span_start) from ${t.job_done_spans} where job = ${job.name})) as first`.execute(
    db,
  );
  const watermark = await readWatermark(db, job.name);
  // From the job's declared start, else the oldest window anything recorded, else its watermark.
  const candidates = [job.start, firsts.rows[0]?.first ?? undefined, watermark ?? undefined].filter(
    (d): d is Date => !!d,
  );
  let missing = 0;
  let missingCapped = false;
  if (candidates.length) {
    const from = new Date(Math.min(...candidates.map((d) => d.getTime())));
    const lastClosedEnd = windowAt(job.grid, job.timezone, new Date(now.getTime() - job.latenessMs)).start;
    if (from < lastClosedEnd) {
      // A fixed grid is aligned to the epoch: arithmetic (the overview is recomputed every second).
      const closed =
        job.grid.kind === 'fixed'
          ? Math.ceil(
              (lastClosedEnd.getTime() - windowStartAt(job.grid, job.timezone, from).getTime()) / job.grid.ms,
            )
          : windowsInRange(job.grid, job.timezone, from, lastClosedEnd, MISSING_CAP + 1).length;
      missingCapped = closed > MISSING_CAP;
      // Nothing is recorded before `from`; what is recorded from the last closed window's end on
      // (an open window a test or a hand put there) is not among the closed ones: a short range.
      const open = await db
        .selectFrom('job_windows')
        .select(sql<number>`count(distinct window_start)::int`.as('n'))
        .where('job', '=', job.name)
        .where('window_start', '>=', lastClosedEnd)
        .executeTakeFirstOrThrow();
      missing = Math.max(0, Math.min(closed, MISSING_CAP) - (recorded - open.n));
    }
  }
  const running = await client.workflow
    .count(`${SA_JOB.name} = "${job.name}" AND ${SA_KIND.name} = "window" AND ExecutionStatus = "Running"`)
    .then((c) => c.count);
  return { done: by('done'), failed: by('failed'), running, missing, missingCapped };
}

/** The overview's rows: `jobsOverview` plus the schedule's spec in words and as Temporal has it, and health. */
export async function overviewRows(db: Kysely<Database>, client: Client, catalog: Catalog, now: Date) {
  const rows = await jobsOverview(db, client, catalog, now);
  return Promise.all(
    rows.map(async (row) => {
      const job = catalog.get(row.job);
      return {
        ...row,
        tick: scheduleOf(job.tick),
        health: await jobHealth(db, client, job, now),
        sparkline: `/api/jobs/${encodeURIComponent(job.name)}/durations.svg`,
      };
    }),
  );
}
