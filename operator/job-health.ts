// What the page's overview adds to `jobsOverview`: the schedule in words next to the spec the
// Temporal Schedule really has (cron or interval), and a health summary of the job's windows
// (done / failed / running / missing), like a partition view's counts.
import type { Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import { ledger } from '../db/ledger-schema.js';
import type { Database } from '../db/schema.js';
import { formatDuration } from '../schedules/duration.js';
import type { Catalog, Job, Tick } from '../schedules/job.js';
import { jobsOverview, readWatermarks, type ScheduleState } from './overview.js';
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

/** Window workflows running now, by job: one listing of them all (or of one job's). */
async function runningWindows(client: Client, jobs: readonly Job[]): Promise<Map<string, number>> {
  const one = jobs.length === 1 ? ` AND ${SA_JOB.name} = "${jobs[0]!.name}"` : '';
  const out = new Map<string, number>();
  for await (const w of client.workflow.list({
    query: `${SA_KIND.name} = "window" AND ExecutionStatus = "Running"${one}`,
    pageSize: 1_000,
  })) {
    const job = w.typedSearchAttributes.get(SA_JOB);
    if (job !== undefined) out.set(job, (out.get(job) ?? 0) + 1);
  }
  return out;
}

/** The end of the job's newest closed window at `now`. */
const lastClosedEndOf = (job: Job, now: Date) =>
  windowAt(job.grid, job.timezone, new Date(now.getTime() - job.latenessMs)).start;

/**
 * Counts over each window's latest generation (windows folded into spans are done), plus the
 * closed windows nothing has recorded, for every job given. Reads the counts kept as windows change
 * (job_window_counts, migration 20261201T2000) and a few index probes a job, in five statements
 * for all of them and one listing of the running windows: the same cost on years of history as on
 * a day, and a few statements whether there are ten jobs or a thousand.
 */
export async function jobsHealth(
  db: Kysely<Database>,
  client: Client,
  jobs: readonly Job[],
  now: Date,
  o: { watermarks?: Promise<Map<string, Date>> } = {},
): Promise<Map<string, JobHealth>> {
  const names = jobs.map((j) => j.name);
  if (!names.length) return new Map();
  const byName = new Map(jobs.map((j) => [j.name, j]));
  const backlog = await db
    .selectFrom('job_span_backlog')
    .select('job')
    .distinct()
    .where('job', 'in', names)
    .execute();
  for (const { job } of backlog) await countSpanBacklog(db, byName.get(job)!);
  const t = ledger(db);
  const ends = jobs.map((j) => lastClosedEndOf(j, now));
  const [counts, firsts, open, watermarks, running] = await Promise.all([
    db
      .selectFrom('job_window_counts')
      .select(['job', 'status', sql<string>`sum(n)`.as('n')])
      .where('job', 'in', names)
      .groupBy(['job', 'status'])
      .execute(),
    sql<{ job: string; first: Date | null }>`
      select j.job, least((select min(window_start) from ${t.job_windows} where job = j.job),
                          (select min(span_start) from ${t.job_done_spans} where job = j.job)) as first
        from unnest(${names}::text[]) as j(job)`.execute(db),
    // What is recorded from the last closed window's end on (an open window a test or a hand put
    // there) is not among the closed ones: a short range a job.
    sql<{ job: string; n: number }>`
      select j.job, (select count(distinct window_start)::int from ${t.job_windows} w
                      where w.job = j.job and w.window_start >= j.closed_end) as n
        from unnest(${names}::text[], ${ends.map((d) => d.toISOString())}::timestamptz[]) as j(job, closed_end)`.execute(
      db,
    ),
    o.watermarks ?? readWatermarks(db, names),
    runningWindows(client, jobs),
  ]);
  const countsOf = new Map<string, Map<string, number>>();
  for (const r of counts) {
    const m = countsOf.get(r.job) ?? new Map<string, number>();
    m.set(r.status, Number(r.n));
    countsOf.set(r.job, m);
  }
  const firstOf = new Map(firsts.rows.map((r) => [r.job, r.first]));
  const openOf = new Map(open.rows.map((r) => [r.job, r.n]));
  const out = new Map<string, JobHealth>();
  jobs.forEach((job, i) => {
    const mine = countsOf.get(job.name) ?? new Map<string, number>();
    // Windows recorded: rows of any generation or a span's, one each.
    const recorded = [...mine.values()].reduce((n, k) => n + k, 0);
    // From the job's declared start, else the oldest window anything recorded, else its watermark.
    const candidates = [job.start, firstOf.get(job.name) ?? undefined, watermarks.get(job.name)].filter(
      (d): d is Date => !!d,
    );
    let missing = 0;
    let missingCapped = false;
    const lastClosedEnd = ends[i]!;
    const from = candidates.length ? new Date(Math.min(...candidates.map((d) => d.getTime()))) : undefined;
    if (from && from < lastClosedEnd) {
      // A fixed grid is aligned to the epoch: arithmetic (the overview is recomputed every second).
      const closed =
        job.grid.kind === 'fixed'
          ? Math.ceil(
              (lastClosedEnd.getTime() - windowStartAt(job.grid, job.timezone, from).getTime()) / job.grid.ms,
            )
          : windowsInRange(job.grid, job.timezone, from, lastClosedEnd, MISSING_CAP + 1).length;
      missingCapped = closed > MISSING_CAP;
      missing = Math.max(0, Math.min(closed, MISSING_CAP) - (recorded - (openOf.get(job.name) ?? 0)));
    }
    out.set(job.name, {
      done: mine.get('done') ?? 0,
      failed: mine.get('failed') ?? 0,
      running: running.get(job.name) ?? 0,
      missing,
      missingCapped,
    });
  });
  return out;
}

/** One job's health (see jobsHealth). */
export async function jobHealth(
  db: Kysely<Database>,
  client: Client,
  job: Job,
  now: Date,
): Promise<JobHealth> {
  return (await jobsHealth(db, client, [job], now)).get(job.name)!;
}

/** The overview's rows: `jobsOverview` plus the schedule's spec in words and as Temporal has it, and health. */
export async function overviewRows(
  db: Kysely<Database>,
  client: Client,
  catalog: Catalog,
  now: Date,
  o: { schedules?: Map<string, ScheduleState | null> | Promise<Map<string, ScheduleState | null>> } = {},
) {
  // Read once for both halves of the row.
  const watermarks = readWatermarks(
    db,
    catalog.jobs.map((j) => j.name),
  );
  const [rows, health] = await Promise.all([
    jobsOverview(db, client, catalog, now, { ...o, watermarks }),
    jobsHealth(db, client, catalog.jobs, now, { watermarks }),
  ]);
  return rows.map((row) => {
    const job = catalog.get(row.job);
    return {
      ...row,
      tick: scheduleOf(job.tick),
      health: health.get(job.name)!,
      sparkline: `/api/jobs/${encodeURIComponent(job.name)}/durations.svg`,
    };
  });
}
