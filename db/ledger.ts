// Ledger repository: every read and write of watermarks, window markers, run history and
// quarantine. Each function takes `db` or an open transaction first so they compose.
import { sql, type Kysely, type RawBuilder, type Transaction } from 'kysely';
import type { Database, RunKind } from './schema.js';

type Db = Kysely<Database> | Transaction<Database>;

export interface WindowRef {
  readonly job: string;
  readonly start: Date;
  readonly end: Date;
  readonly generation: number;
  readonly key: string;
}

/**
 * The tail of a `with recursive` statement that moves the job's watermark forward from `from`
 * over its contiguous done windows, hopping from each to the next by its key (an index lookup
 * each), and returns the new watermark (no row when it did not move).
 */
function advanceOverDone(job: string, from: RawBuilder<unknown>): RawBuilder<{ watermark: Date }> {
  return sql`chain(window_end) as (
      select ${from}::timestamptz
      union all
      select next.window_end from chain cross join lateral (
        select jw.window_end from job_windows jw
         where jw.job = ${job} and jw.window_start = chain.window_end and jw.generation = 0 and jw.status = 'done'
      ) next
    )
    update job_watermarks set watermark = c.new_watermark, updated_at = now()
      from (select max(window_end) as new_watermark from chain) c
     where job = ${job} and c.new_watermark > job_watermarks.watermark
    returning job_watermarks.watermark`;
}

/**
 * The job's watermark, set to `initial` on first sight (never moved back), then moved over the
 * contiguous done windows starting at it. A window only moves the watermark when it commits, so
 * windows done before the job's first tick (a backfill or a manual run before the schedule
 * started), or committed while the first tick created the row, would otherwise leave it behind
 * until some later window commits: behind the done prefix, and short of a failed window.
 */
export async function watermarkOf(db: Db, job: string, initial: Date): Promise<Date> {
  await db
    .insertInto('job_watermarks')
    .values({ job, watermark: initial, updated_at: new Date() })
    .onConflict((oc) => oc.column('job').doNothing())
    .execute();
  // Only forward, over done windows only (done is final): a stale read moves it less, never wrong.
  await sql`with recursive ${advanceOverDone(job, sql`(select watermark from job_watermarks where job = ${job})`)}`.execute(
    db,
  );
  const row = await db
    .selectFrom('job_watermarks')
    .select('watermark')
    .where('job', '=', job)
    .executeTakeFirstOrThrow();
  return row.watermark;
}

export async function readWatermark(db: Db, job: string): Promise<Date | undefined> {
  const row = await db
    .selectFrom('job_watermarks')
    .select('watermark')
    .where('job', '=', job)
    .executeTakeFirst();
  return row?.watermark;
}

/** Starts of the job's done windows (generation 0) in [from, to). */
export async function doneStarts(db: Db, job: string, from: Date, to: Date): Promise<Set<number>> {
  const rows = await db
    .selectFrom('job_windows')
    .select('window_start')
    .where('job', '=', job)
    .where('generation', '=', 0)
    .where('status', '=', 'done')
    .where('window_start', '>=', from)
    .where('window_start', '<', to)
    .execute();
  return new Set(rows.map((r) => r.window_start.getTime()));
}

/**
 * The job's failed windows (generation 0, not done) in [from, to): start -> when it was last
 * tried (ms), so that retries can take turns, least recently tried first.
 */
export async function failedStarts(db: Db, job: string, from: Date, to: Date): Promise<Map<number, number>> {
  const rows = await db
    .selectFrom('job_windows')
    .select(['window_start', 'started_at', 'finished_at'])
    .where('job', '=', job)
    .where('generation', '=', 0)
    .where('status', '=', 'failed')
    .where('window_start', '>=', from)
    .where('window_start', '<', to)
    .execute();
  return new Map(rows.map((r) => [r.window_start.getTime(), (r.finished_at ?? r.started_at).getTime()]));
}

export async function isDone(db: Db, w: Pick<WindowRef, 'job' | 'start' | 'generation'>): Promise<boolean> {
  const row = await db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', w.job)
    .where('window_start', '=', w.start)
    .where('generation', '=', w.generation)
    .executeTakeFirst();
  return row?.status === 'done';
}

/**
 * Claims the window's done marker inside the effect's transaction: one upsert that only
 * succeeds while the window is not done. A concurrent attempt blocks on the key until this
 * transaction ends, then finds it done: exactly one attempt wins, the others change nothing.
 * Returns the window's attempt count (more than 1: earlier attempts failed), or undefined.
 */
export async function claimWindow(
  trx: Transaction<Database>,
  w: WindowRef,
  a: { trigger: string; workflowId: string | null; at: Date },
): Promise<number | undefined> {
  const row = await trx
    .insertInto('job_windows')
    .values({
      job: w.job,
      window_start: w.start,
      generation: w.generation,
      window_end: w.end,
      window_key: w.key,
      status: 'done',
      attempts: 1,
      trigger: a.trigger,
      workflow_id: a.workflowId,
      started_at: a.at,
    })
    .onConflict((oc) =>
      oc
        .columns(['job', 'window_start', 'generation'])
        .doUpdateSet({
          status: 'done',
          attempts: sql`job_windows.attempts + 1`,
          trigger: a.trigger,
          workflow_id: a.workflowId,
          started_at: a.at,
          reason: null,
        })
        .where('job_windows.status', '<>', 'done'),
    )
    .returning('attempts')
    .executeTakeFirst();
  return row?.attempts;
}

export interface WindowFinish {
  readonly counts: {
    readonly input: number;
    readonly applied: number;
    readonly quarantined: number;
    readonly details?: Readonly<Record<string, unknown>>;
  };
  readonly startedAt: Date;
  readonly finishedAt: Date;
  readonly workflowId: string | null;
  readonly attempt: number;
}

/**
 * Ends a claimed window inside its transaction, in two statements: lock the job's watermark
 * row (this serialises the commits of one job's windows, so two windows finishing together
 * cannot leave the watermark short), then one statement that stores the counts, records the
 * run and moves the watermark over the contiguous done windows starting at it. The watermark
 * never moves back and never passes a window that is not done. Returns the watermark.
 */
export async function finishWindow(
  trx: Transaction<Database>,
  w: WindowRef,
  f: WindowFinish,
): Promise<Date | undefined> {
  const locked = await trx
    .selectFrom('job_watermarks')
    .select('watermark')
    .where('job', '=', w.job)
    .forUpdate()
    .executeTakeFirst();
  const durationMs = f.finishedAt.getTime() - f.startedAt.getTime();
  const { input, applied, quarantined } = f.counts;
  const result = await sql<{ watermark: Date }>`
    with recursive counts as (
      update job_windows
         set records_in = ${input}, records_applied = ${applied}, records_quarantined = ${quarantined},
             finished_at = ${f.finishedAt}, duration_ms = ${durationMs}
       where job = ${w.job} and window_start = ${w.start} and generation = ${w.generation}
    ), run as (
      insert into job_runs (kind, job, window_start, generation, workflow_id, attempt, started_at, finished_at, duration_ms, outcome, details)
      values ('window', ${w.job}, ${w.start}, ${w.generation}, ${f.workflowId}, ${f.attempt}, ${f.startedAt}, ${f.finishedAt}, ${durationMs},
              'processed', ${JSON.stringify({ input, applied, quarantined, ...f.counts.details })}::jsonb)
    ), ${advanceOverDone(w.job, sql`${locked?.watermark ?? null}`)}`.execute(trx);
  return result.rows[0]?.watermark ?? locked?.watermark;
}

/** Records a failed attempt (after its transaction rolled back), unless another attempt finished the window. */
export async function failAttempt(
  db: Db,
  w: WindowRef,
  a: { trigger: string; workflowId: string | null; at: Date; reason: string },
): Promise<void> {
  await db
    .insertInto('job_windows')
    .values({
      job: w.job,
      window_start: w.start,
      generation: w.generation,
      window_end: w.end,
      window_key: w.key,
      status: 'failed',
      attempts: 1,
      trigger: a.trigger,
      workflow_id: a.workflowId,
      started_at: a.at,
      finished_at: new Date(),
      reason: a.reason,
    })
    .onConflict((oc) =>
      oc
        .columns(['job', 'window_start', 'generation'])
        .doUpdateSet({
          status: 'failed',
          attempts: sql`job_windows.attempts + 1`,
          trigger: a.trigger,
          workflow_id: a.workflowId,
          started_at: a.at,
          finished_at: new Date(),
          reason: a.reason,
        })
        .where('job_windows.status', '<>', 'done'),
    )
    .execute();
}

export interface RunRecord {
  kind: RunKind;
  job: string;
  windowStart?: Date | null;
  generation?: number | null;
  workflowId?: string | null;
  attempt?: number | null;
  startedAt: Date;
  finishedAt: Date;
  outcome: string;
  reason?: string | null;
  details?: Record<string, unknown>;
}

export async function recordRun(db: Db, r: RunRecord): Promise<void> {
  await db
    .insertInto('job_runs')
    .values({
      kind: r.kind,
      job: r.job,
      window_start: r.windowStart ?? null,
      generation: r.generation ?? null,
      workflow_id: r.workflowId ?? null,
      attempt: r.attempt ?? null,
      started_at: r.startedAt,
      finished_at: r.finishedAt,
      duration_ms: Math.max(0, r.finishedAt.getTime() - r.startedAt.getTime()),
      outcome: r.outcome,
      reason: r.reason ?? null,
      details: JSON.stringify(r.details ?? {}),
    })
    .execute();
}
