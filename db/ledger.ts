// Ledger repository: every read and write of watermarks, window markers, run history and
// quarantine. Each function takes `db` or an open transaction first so they compose.
import { sql, type Kysely, type Transaction } from 'kysely';
import { coveredBy, inSpan, SPAN_LOCK_CLASS, SPAN_LOCK_HORIZON, spansIn } from './compaction.js';
import { literal } from './connection.js';
import { ledger, schemaOf } from './ledger-schema.js';
import type { Database, RunKind } from './schema.js';
import { parseWindowKey } from '../contract/window-key.js';

type Db = Kysely<Database> | Transaction<Database>;

export interface WindowRef {
  readonly job: string;
  readonly start: Date;
  readonly end: Date;
  readonly generation: number;
  readonly key: string;
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
  const t = ledger(db);
  await sql`select ${t.fn('tidemark_advance_watermark')}(${job}, (select watermark from ${t.job_watermarks} where job = ${job}))`.execute(
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

/**
 * Starts of the job's done windows (generation 0) in [from, to), from their markers only: windows
 * folded into spans are left out. For ranges at or past the watermark only (compaction never passes
 * it); elsewhere use doneWindows.
 */
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
 * Starts of those of `windows` (the job's, oldest first) that are done at generation 0: by their
 * marker or by a span of compacted markers. Throws when a window starts in a span but ends past it.
 */
export async function doneWindows(
  db: Db,
  job: string,
  windows: readonly { start: Date; end: Date }[],
): Promise<Set<number>> {
  const first = windows[0];
  const last = windows.at(-1);
  if (!first || !last) return new Set();
  const done = await doneStarts(db, job, first.start, last.end);
  const spans = await spansIn(db, job, first.start, last.end);
  if (spans.length) for (const w of windows) if (coveredBy(spans, job, w)) done.add(w.start.getTime());
  return done;
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

/**
 * What earlier attempts of one activity did with each of `starts` (a job's generation-0 windows):
 * start -> the outcomes of their run records by `workflowId` at an attempt before `beforeAttempt`,
 * started since the activity was first scheduled (`since`: runs of a workflow id used again
 * before are older). A window without one was not reached by them.
 */
export async function runsOfEarlierAttempts(
  db: Db,
  job: string,
  starts: readonly Date[],
  a: { workflowId: string; beforeAttempt: number; since: Date },
): Promise<Map<number, Set<string>>> {
  const by = new Map<number, Set<string>>();
  if (starts.length === 0 || a.beforeAttempt <= 1) return by;
  const rows = await db
    .selectFrom('job_runs')
    .select(['window_start', 'outcome'])
    .where('kind', '=', 'window')
    .where('job', '=', job)
    .where('generation', '=', 0)
    .where('workflow_id', '=', a.workflowId)
    .where('attempt', '<', a.beforeAttempt)
    .where('started_at', '>=', a.since)
    .where('window_start', 'in', [...starts])
    .execute();
  for (const r of rows) {
    const t = r.window_start!.getTime();
    by.set(t, (by.get(t) ?? new Set()).add(r.outcome));
  }
  return by;
}

/**
 * Counts the start of a local attempt of the window run `runId` (committed on its own, before the
 * window's transaction); returns how many attempts of that run have started, this one included.
 */
export async function startLocalAttempt(db: Db, windowKey: string, runId: string): Promise<number> {
  const row = await db
    .insertInto('local_window_attempts')
    .values({ window_key: windowKey, run_id: runId, starts: 1 })
    .onConflict((oc) =>
      oc.column('window_key').doUpdateSet({
        starts: sql`case when local_window_attempts.run_id = excluded.run_id
                         then local_window_attempts.starts + 1 else 1 end`,
        run_id: sql`excluded.run_id`,
      }),
    )
    .returning('starts')
    .executeTakeFirstOrThrow();
  return row.starts;
}

export async function isDone(db: Db, w: Pick<WindowRef, 'job' | 'start' | 'generation'>): Promise<boolean> {
  const row = await db
    .selectFrom('job_windows')
    .select('status')
    .where('job', '=', w.job)
    .where('window_start', '=', w.start)
    .where('generation', '=', w.generation)
    .executeTakeFirst();
  if (row) return row.status === 'done';
  return w.generation === 0 && (await inSpan(db, w.job, w.start));
}

/**
 * The attempts recorded for the window a key names (an incident's subject): null for a subject that
 * is not a window's key, and for a window whose marker was folded into a span (spans keep no counts).
 */
export async function windowAttemptsOf(db: Db, job: string, key: string): Promise<number | null> {
  // By the primary key the key names: the key itself has no index (one would cost as much as the ledger's keys).
  const w = parseWindowKey(job, key);
  if (!w) return null;
  const row = await db
    .selectFrom('job_windows')
    .select('attempts')
    .where('job', '=', job)
    .where('window_start', '=', w.start)
    .where('generation', '=', w.generation)
    .executeTakeFirst();
  return row?.attempts ?? null;
}

/**
 * Limits on the window's transaction, set with its claim (`set_config(..., true)`: they end with
 * the transaction): how long a statement may wait for a lock, and how long the transaction may
 * sit idle before the server ends it.
 */
export interface TransactionBound {
  readonly lockTimeoutMs: number;
  readonly idleTimeoutMs: number;
}

/**
 * Claims the window's done marker inside the effect's transaction: one upsert that only
 * succeeds while the window is not done. A concurrent attempt blocks on the key until this
 * transaction ends, then finds it done: exactly one attempt wins, the others change nothing.
 * It is the transaction's first statement and carries its BEGIN and its bound (one round trip;
 * the transaction runs on a held connection, db/connection.ts). Returns the window's attempt
 * count (more than 1: earlier attempts failed), or undefined.
 */
export async function claimWindow(
  trx: Transaction<Database>,
  w: WindowRef,
  a: { trigger: string; workflowId: string | null; at: Date },
  bound?: TransactionBound,
): Promise<number | undefined> {
  const lock = bound ? literal(Math.ceil(bound.lockTimeoutMs)) : 'null';
  const idle = bound ? literal(Math.ceil(bound.idleTimeoutMs)) : 'null';
  // The server function (migration 20261130T2230) keeps the upsert's plan for the session.
  const schema = schemaOf(trx);
  const row = await sql<{ attempts: number | null }>`${sql.raw(`begin;
    select ${schema}.tidemark_claim_window(${literal(w.job)}, ${literal(w.start)}::timestamptz, ${literal(w.generation)}::integer,
      ${literal(w.end)}::timestamptz, ${literal(w.key)}, ${literal(a.trigger)}, ${literal(a.workflowId)}::text,
      ${literal(a.at)}::timestamptz, ${lock}::text, ${idle}::text) as attempts`)}`.execute(trx);
  return row.rows[0]?.attempts ?? undefined;
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
 * Ends a claimed window: lock the job's watermark row (this serialises the commits of one
 * job's windows, so two windows finishing together cannot leave the watermark short), store the
 * counts, record the run and move the watermark over the contiguous done windows starting at it,
 * in the server function `tidemark_finish_window` (migration 20261130T1800). The watermark never
 * moves back and never passes a window that is not done. It is the transaction's last statement
 * and carries its COMMIT (one round trip for both). Returns the watermark.
 */
export async function finishWindow(
  trx: Transaction<Database>,
  w: WindowRef,
  f: WindowFinish,
): Promise<Date | undefined> {
  const { input, applied, quarantined } = f.counts;
  const details = JSON.stringify({ input, applied, quarantined, ...f.counts.details });
  const schema = schemaOf(trx);
  const result = await sql<{ watermark: Date | null }>`${sql.raw(`
    select ${schema}.tidemark_finish_window(${literal(w.job)}, ${literal(w.start)}::timestamptz, ${literal(w.generation)}::integer,
      ${literal(input)}::integer, ${literal(applied)}::integer, ${literal(quarantined)}::integer,
      ${literal(f.startedAt)}::timestamptz, ${literal(f.finishedAt)}::timestamptz, ${literal(f.workflowId)}::text,
      ${literal(f.attempt)}::integer, ${literal(details)}::jsonb) as watermark;
    commit`)}`.execute(trx);
  return result.rows[0]?.watermark ?? undefined;
}

/** `values` as an array literal of `type` (for statements that carry BEGIN or COMMIT). */
const arrayOf = (values: readonly (string | number | Date | null)[], type: string): string =>
  `array[${values.map(literal).join(',')}]::${type}[]`;

/**
 * Claims a group of one job's windows in one statement (tidemark_claim_windows, migration
 * 20261205T1500): for each, what claimWindow does for one, in the group's order. It is the group
 * transaction's first statement and carries its BEGIN. Returns the attempt count of each window
 * claimed, by key; a window done already is not in it.
 */
export async function claimWindows(
  trx: Transaction<Database>,
  ws: readonly WindowRef[],
  a: { trigger: string; workflowId: string | null; at: Date },
  bound?: TransactionBound,
): Promise<Map<string, number>> {
  const job = ws[0]!.job;
  if (ws.some((w) => w.job !== job)) throw new Error('a group of windows is of one job');
  const lock = bound ? literal(Math.ceil(bound.lockTimeoutMs)) : 'null';
  const idle = bound ? literal(Math.ceil(bound.idleTimeoutMs)) : 'null';
  const schema = schemaOf(trx);
  const rows = await sql<{
    claimed_start: Date;
    claimed_generation: number;
    claimed_attempts: number;
  }>`${sql.raw(`begin;
    select * from ${schema}.tidemark_claim_windows(${literal(job)}, ${arrayOf(
      ws.map((w) => w.start),
      'timestamptz',
    )}, ${arrayOf(
      ws.map((w) => w.generation),
      'integer',
    )}, ${arrayOf(
      ws.map((w) => w.end),
      'timestamptz',
    )}, ${arrayOf(
      ws.map((w) => w.key),
      'text',
    )}, ${literal(a.trigger)}, ${literal(a.workflowId)}::text, ${literal(a.at)}::timestamptz, ${lock}::text, ${idle}::text)`)}`.execute(
    trx,
  );
  const keyOf = new Map(ws.map((w) => [`${w.start.getTime()}#${w.generation}`, w.key]));
  return new Map(
    rows.rows.map((r) => [
      keyOf.get(`${new Date(r.claimed_start).getTime()}#${r.claimed_generation}`)!,
      r.claimed_attempts,
    ]),
  );
}

/**
 * Ends a group's claimed windows in one statement carrying the COMMIT (tidemark_finish_windows,
 * migration 20261205T1500): for each, what finishWindow does for one, with the job's watermark
 * row locked once. Returns the watermark.
 */
export async function finishWindows(
  trx: Transaction<Database>,
  finished: readonly { readonly w: WindowRef; readonly f: WindowFinish }[],
  run: { workflowId: string | null; attempt: number },
): Promise<Date | undefined> {
  const job = finished[0]!.w.job;
  const counts = finished.map(({ f }) => f.counts);
  const schema = schemaOf(trx);
  const details = finished.map(({ f }) => {
    const { input, applied, quarantined } = f.counts;
    return JSON.stringify({ input, applied, quarantined, ...f.counts.details });
  });
  const result = await sql<{ watermark: Date | null }>`${sql.raw(`
    select ${schema}.tidemark_finish_windows(${literal(job)}, ${arrayOf(
      finished.map(({ w }) => w.start),
      'timestamptz',
    )}, ${arrayOf(
      finished.map(({ w }) => w.generation),
      'integer',
    )}, ${arrayOf(
      counts.map((c) => c.input),
      'integer',
    )}, ${arrayOf(
      counts.map((c) => c.applied),
      'integer',
    )}, ${arrayOf(
      counts.map((c) => c.quarantined),
      'integer',
    )}, ${arrayOf(
      finished.map(({ f }) => f.startedAt),
      'timestamptz',
    )}, ${arrayOf(
      finished.map(({ f }) => f.finishedAt),
      'timestamptz',
    )}, ${literal(run.workflowId)}::text, ${literal(run.attempt)}::integer, ${arrayOf(details, 'jsonb')}) as watermark;
    commit`)}`.execute(trx);
  return result.rows[0]?.watermark ?? undefined;
}

/**
 * Records a failed attempt (after its transaction rolled back), unless another attempt finished the
 * window, or its generation-0 marker was folded into a span (done: a failed row there would show it
 * failed and keep a rerun from putting its marker back). The span lock, taken shared as the claim
 * takes it (for a window old enough to be folded), waits out a compaction batch folding the window,
 * so the span check sees its commit.
 */
export async function failAttempt(
  db: Db,
  w: WindowRef,
  a: { trigger: string; workflowId: string | null; at: Date; reason: string },
): Promise<void> {
  if (w.generation === 0) {
    if (!db.isTransaction) return await db.transaction().execute((trx) => failAttempt(trx, w, a));
    // Only a window that could be in a span takes it (as in the claim, migration 20261201T2100).
    await sql`select pg_advisory_xact_lock_shared(${SPAN_LOCK_CLASS}::integer, hashtext(${w.job}))
               where ${w.start}::timestamptz < clock_timestamp() - ${SPAN_LOCK_HORIZON}::interval`.execute(
      db,
    );
    if (await inSpan(db, w.job, w.start)) return;
  }
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

/** Records set aside by a window's handler (ctx.quarantine), in its transaction; returns how many. */
export async function quarantineRecords(
  trx: Transaction<Database>,
  w: Pick<WindowRef, 'job' | 'start' | 'generation'>,
  records: readonly { readonly key: string; readonly reason: string; readonly payload?: unknown }[],
): Promise<number> {
  if (records.length === 0) return 0;
  await trx
    .insertInto('quarantine')
    .values(
      records.map((r) => ({
        job: w.job,
        window_start: w.start,
        generation: w.generation,
        record_key: String(r.key),
        reason: String(r.reason),
        payload: JSON.stringify(r.payload ?? {}),
      })),
    )
    .execute();
  return records.length;
}
