// Slim done markers: contiguous done generation-0 windows that ended before a cutoff (and behind the
// job's watermark) are folded into spans (job_done_spans). A window in a span is done at generation 0.
import { sql, type Kysely, type Transaction } from 'kysely';
import { ledger } from './ledger-schema.js';
import type { Database } from './schema.js';

type Db = Kysely<Database> | Transaction<Database>;

/** Class id of the per-job span lock (the claim takes it shared, compaction and expansion exclusive). */
export const SPAN_LOCK_CLASS = 1414;
/**
 * Compaction folds only windows that ended at least this long ago on the database's clock, whatever
 * cutoff it is given; the claim and failAttempt take the span lock only for windows that started
 * more than SPAN_LOCK_HORIZON ago (migration 20261201T2100), so a busy job's current windows never
 * hold compaction off (nor wait for it). The gap between the two covers a window transaction that
 * stays open for hours.
 */
export const COMPACTION_MIN_AGE = '1 day';
export const SPAN_LOCK_HORIZON = '12 hours';
/** How often compaction tries the span lock again while window transactions of the job hold it. */
const LOCK_POLL_MS = 50;
/** Class id of the per-job lock that puts windows back from spans one at a time. */
const EXPAND_LOCK_CLASS = 1415;

export interface CompactionResult {
  /** Windows folded into spans. */
  readonly windows: number;
  /** Batches committed. */
  readonly batches: number;
}

export interface DoneSpan {
  readonly start: Date;
  readonly end: Date;
}

/**
 * Folds done markers into spans, job by job, in short transactions of at most `batch` windows each
 * (one transaction: deleting the rows and writing the spans commit or roll back together, so a kill
 * at any point loses nothing). A window is folded when it is done at generation 0, ends at or before
 * `cutoff`, now minus COMPACTION_MIN_AGE (a later cutoff is clamped to it) and its job's watermark
 * (the watermark's walk never reads behind itself), has no other generation and no open rerun request. Running it again folds only what is new: idempotent.
 * Waits at most `lockTimeoutMs` for window transactions of the job in flight, trying the lock without
 * queueing for it (a queued request would hold up the job's new claims); a job it cannot lock
 * is left for the next run (its error is thrown after the other jobs were done). `job`: that job only;
 * `onBusy`: told each time a job's span lock was held.
 */
export async function compactDoneMarkers(
  db: Kysely<Database>,
  o: { cutoff: Date; batch?: number; lockTimeoutMs?: number; job?: string; onBusy?: (job: string) => void },
): Promise<CompactionResult> {
  const batch = o.batch ?? 10_000;
  const lockTimeout = o.lockTimeoutMs ?? 2_000;
  if (!Number.isInteger(batch) || batch < 1)
    throw new Error(`compactDoneMarkers: batch must be a positive integer, got ${batch}`);
  let q = db.selectFrom('job_watermarks').select(['job']).orderBy('job');
  if (o.job !== undefined) q = q.where('job', '=', o.job);
  const jobs = await q.execute();
  let windows = 0;
  let batches = 0;
  let failure: unknown;
  for (const { job } of jobs) {
    try {
      // Markers that stay (another generation, an open request) are passed over, not read again.
      let after: Date | null = null;
      let deadline = Date.now() + lockTimeout;
      for (;;) {
        const from: Date | null = after;
        const r: { folded: number; last: Date | null } | 'busy' = await db
          .transaction()
          .execute((trx) => compactBatch(trx, job, o.cutoff, batch, lockTimeout, from));
        if (r === 'busy') {
          o.onBusy?.(job);
          if (Date.now() >= deadline)
            throw new Error(
              `compactDoneMarkers: window transactions of job ${job} held its span lock for ${lockTimeout} ms; its markers are left for the next run`,
            );
          await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
          continue;
        }
        deadline = Date.now() + lockTimeout;
        if (!r.last) break;
        after = r.last;
        if (r.folded === 0) continue;
        windows += r.folded;
        batches++;
      }
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure) throw failure;
  return { windows, batches };
}

/**
 * One batch of the job: the next `batch` done generation-0 markers after `after` (in start order);
 * those with no other generation and no open rerun request are deleted, each island of contiguous
 * ones written as a span. No plan depends on statistics (a fresh table has none): each step is one
 * index range over the batch, never a join the planner could loop over the job's history.
 * Returns how many it folded and the last start it looked at (null: nothing left).
 */
async function compactBatch(
  trx: Transaction<Database>,
  job: string,
  cutoff: Date,
  batch: number,
  lockTimeoutMs: number,
  after: Date | null,
): Promise<{ folded: number; last: Date | null } | 'busy'> {
  await sql`select set_config('lock_timeout', ${String(Math.ceil(lockTimeoutMs))}, true)`.execute(trx);
  // Tried, not waited for: a waiting exclusive request would queue the job's new claims behind it.
  const got = await sql<{
    got: boolean;
  }>`select pg_try_advisory_xact_lock(${SPAN_LOCK_CLASS}::integer, hashtext(${job})) as got`.execute(trx);
  if (!got.rows[0]?.got) return 'busy';
  // The markers deleted stay done in the job's counts (job_window_counts, migration 20261201T2000),
  // and the spans written are no backlog (20261201T2300).
  await spanFold(trx, true);
  const t = ledger(trx);
  const until = sql`least(${cutoff}::timestamptz, now() - ${COMPACTION_MIN_AGE}::interval,
                          (select watermark from ${t.job_watermarks} where job = ${job}))`;
  const base = await sql<{ lo: Date | null; hi: Date | null }>`
    select min(window_start) as lo, max(window_start) as hi from (
      select window_start from ${t.job_windows}
       where job = ${job} and generation = 0 and status = 'done'
         and window_start > coalesce(${after}::timestamptz, '-infinity') and window_end <= ${until}
       order by window_start
       limit ${batch}) b`.execute(trx);
  const { lo, hi } = base.rows[0] ?? { lo: null, hi: null };
  if (!lo || !hi) return { folded: 0, last: null };
  // The batch's markers deleted; each island of contiguous ones becomes a span.
  const folded = await sql<{ lo: Date | null; hi: Date | null; n: string | null }>`
    with del as (
      delete from ${t.job_windows} d
       where d.job = ${job} and d.generation = 0 and d.status = 'done'
         and d.window_start >= ${lo}::timestamptz and d.window_start <= ${hi}::timestamptz and d.window_end <= ${until}
         and d.window_start not in (
               select g.window_start from ${t.job_windows} g
                where g.job = ${job} and g.generation <> 0
                  and g.window_start >= ${lo}::timestamptz and g.window_start <= ${hi}::timestamptz)
         and d.window_start not in (
               select r.window_start from ${t.rerun_requests} r
                where r.job = ${job} and r.status in ('pending', 'approved')
                  and r.window_start >= ${lo}::timestamptz and r.window_start <= ${hi}::timestamptz)
      returning d.window_start, d.window_end
    ), marked as (
      select window_start, window_end,
             case when window_start = lag(window_end) over (order by window_start) then 0 else 1 end as brk
        from del
    ), islands as (
      select min(window_start) as s, max(window_end) as e, count(*) as n
        from (select *, sum(brk) over (order by window_start) as grp from marked) g
       group by grp
    ), ins as (
      insert into ${t.job_done_spans} (job, span_start, span_end)
      select ${job}, s, e from islands
      returning span_start
    )
    select min(s) as lo, max(e) as hi, sum(n)::text as n from islands`.execute(trx);
  const row = folded.rows[0];
  const n = Number(row?.n ?? 0);
  if (row?.lo && row.hi && n > 0) await mergeSpans(trx, job, row.lo, row.hi);
  return { folded: n, last: hi };
}

/** Joins the job's spans that touch (one ends where the next starts) within [lo, hi] into one. */
async function mergeSpans(trx: Transaction<Database>, job: string, lo: Date, hi: Date): Promise<void> {
  const t = ledger(trx);
  const groups = await sql<{ s: Date; e: Date }>`
    with touching as (
      select span_start, span_end,
             case when span_start = lag(span_end) over (order by span_start) then 0 else 1 end as brk
        from ${t.job_done_spans}
       where job = ${job} and span_end >= ${lo}::timestamptz and span_start <= ${hi}::timestamptz
    )
    select min(span_start) as s, max(span_end) as e
      from (select *, sum(brk) over (order by span_start) as grp from touching) g
     group by grp having count(*) > 1`.execute(trx);
  for (const g of groups.rows) {
    await trx
      .deleteFrom('job_done_spans')
      .where('job', '=', job)
      .where('span_start', '>=', g.s)
      .where('span_start', '<', g.e)
      .execute();
    await trx.insertInto('job_done_spans').values({ job, span_start: g.s, span_end: g.e }).execute();
  }
}

/**
 * The job's spans that overlap [from, to), oldest first.
 */
export async function spansIn(db: Db, job: string, from: Date, to: Date): Promise<DoneSpan[]> {
  const t = ledger(db);
  const rows = await sql<{ span_start: Date; span_end: Date }>`
    select span_start, span_end from ${t.job_done_spans}
     where job = ${job} and span_end > ${from}::timestamptz and span_start < ${to}::timestamptz
       and span_start >= coalesce((select max(span_start) from ${t.job_done_spans}
                                    where job = ${job} and span_start <= ${from}::timestamptz), '-infinity')
     order by span_start`.execute(db);
  return rows.rows.map((r) => ({ start: r.span_start, end: r.span_end }));
}

/**
 * Whether the window [start, end) is covered by one of `spans` (sorted); throws when it starts in a
 * span but ends past it (the job's windowing changed: never guessed).
 */
export function coveredBy(spans: readonly DoneSpan[], job: string, w: { start: Date; end: Date }): boolean {
  const t = w.start.getTime();
  const span = spans.findLast((s) => s.start.getTime() <= t);
  if (!span || t >= span.end.getTime()) return false;
  if (w.end.getTime() <= span.end.getTime()) return true;
  throw new Error(
    `window ${job}/${w.start.toISOString()} [${w.start.toISOString()}, ${w.end.toISOString()}) starts in the done span [${span.start.toISOString()}, ${span.end.toISOString()}) of job ${job} but ends past it (was the job's grid changed?): refused, not run; fix the job's grid or remove the span by hand`,
  );
}

/** Whether the window starting at `start` lies in a span of the job (done at generation 0). */
export async function inSpan(db: Db, job: string, start: Date): Promise<boolean> {
  const t = ledger(db);
  const r = await sql<{ hit: boolean }>`
    select exists (select 1 from (select span_end from ${t.job_done_spans}
                                   where job = ${job} and span_start <= ${start}::timestamptz
                                   order by span_start desc limit 1) s
                    where s.span_end > ${start}::timestamptz) as hit`.execute(db);
  return r.rows[0]?.hit ?? false;
}

/**
 * Puts the window [start, end) back as a done generation-0 marker when a span holds it, splitting the
 * span around it (for a rerun request, in its transaction: the rerun then sees the window as before
 * compaction). Waits only for a compaction batch of the job, not for its window transactions.
 * Returns whether it did.
 */
export async function expandWindow(
  trx: Transaction<Database>,
  w: { job: string; start: Date; end: Date; key: string },
): Promise<boolean> {
  // Shared: claims only read spans and find the window done either way, so they need not wait;
  // compaction (exclusive) does. Two expansions of the job take turns on a lock of their own.
  await sql`select pg_advisory_xact_lock_shared(${SPAN_LOCK_CLASS}::integer, hashtext(${w.job})),
                   pg_advisory_xact_lock(${EXPAND_LOCK_CLASS}::integer, hashtext(${w.job}))`.execute(trx);
  const spans = await spansIn(trx, w.job, w.start, w.end);
  if (!coveredBy(spans, w.job, w)) return false;
  const span = spans.findLast((s) => s.start.getTime() <= w.start.getTime())!;
  // The span split and the marker put back: the window moves, it stays done (counted once).
  await spanFold(trx, true);
  await trx
    .deleteFrom('job_done_spans')
    .where('job', '=', w.job)
    .where('span_start', '=', span.start)
    .execute();
  const parts = [
    { job: w.job, span_start: span.start, span_end: w.start },
    { job: w.job, span_start: w.end, span_end: span.end },
  ].filter((p) => p.span_end.getTime() > p.span_start.getTime());
  if (parts.length) await trx.insertInto('job_done_spans').values(parts).execute();
  await trx
    .insertInto('job_windows')
    .values({
      job: w.job,
      window_start: w.start,
      generation: 0,
      window_end: w.end,
      window_key: w.key,
      status: 'done',
      attempts: 1,
      trigger: 'compacted',
      workflow_id: null,
      started_at: span.start,
      finished_at: null,
      reason: 'done marker put back from a compacted span for a rerun',
    })
    .execute();
  await spanFold(trx, false);
  return true;
}

/**
 * Tells the counting triggers on job_windows and job_done_spans (migrations 20261201T2000, 2300) that
 * the transaction's next writes move done generation-0 markers between rows and spans: the windows
 * stay done, not counted again nor taken away.
 */
async function spanFold(trx: Transaction<Database>, on: boolean): Promise<void> {
  await sql`select set_config('tidemark.span_fold', ${on ? 'on' : 'off'}, true)`.execute(trx);
}
