// What operators see of the jobs: schedule state, next fires, watermark, lag, last run; and a
// job's recent windows. Shared by the CLI and the management page.
import { ScheduleNotFoundError, type Client } from '@temporalio/client';
import { sql, type Kysely } from 'kysely';
import { windowsBehind } from '../activities/watch.js';
import { ledger } from '../db/ledger-schema.js';
import { lastDrill } from '../jobs/backup/drill.js';
import { backupJobOf } from '../jobs/backup/registry.js';
import { RUN_KIND, type Database, type RunKind } from '../db/schema.js';
import { type Catalog } from '../schedules/job.js';
import { describeTick } from '../schedules/define.js';
import { scheduleIdOf } from '../contract/schedule-ids.js';
import { isoUtc } from '../contract/window-key.js';
import type { LedgerRow } from './window-ledger.js';

/** A job's Temporal Schedule as the overview shows it; null: the job has no schedule. */
export interface ScheduleState {
  paused: boolean;
  note: string | null;
  nextFires: Date[];
}

/** Describes at a time when each job's schedule is described (the CLI's exact reading). */
const DESCRIBES_AT_ONCE = 16;

async function describeSchedule(client: Client, job: string): Promise<ScheduleState | null> {
  try {
    const d = await client.schedule.getHandle(scheduleIdOf(job)).describe();
    return { paused: d.state.paused, note: d.state.note ?? null, nextFires: d.info.nextActionTimes };
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return null;
    throw err;
  }
}

/** The jobs' schedules, each described: exact, one call a job (a few at a time). */
export async function describeSchedules(
  client: Client,
  jobs: readonly string[],
): Promise<Map<string, ScheduleState | null>> {
  const out = new Map<string, ScheduleState | null>();
  for (let i = 0; i < jobs.length; i += DESCRIBES_AT_ONCE) {
    const some = jobs.slice(i, i + DESCRIBES_AT_ONCE);
    const states = await Promise.all(some.map((j) => describeSchedule(client, j)));
    some.forEach((j, k) => out.set(j, states[k]!));
  }
  return out;
}

/**
 * The jobs' schedules in one paged listing, from Temporal's visibility store: one call for a
 * thousand jobs, but a pause made a moment ago may show a second later (describe the schedules a
 * person just acted on).
 */
export async function listSchedules(
  client: Client,
  jobs: readonly string[],
): Promise<Map<string, ScheduleState | null>> {
  const wanted = new Map(jobs.map((j) => [scheduleIdOf(j), j]));
  const out = new Map<string, ScheduleState | null>(jobs.map((j) => [j, null]));
  for await (const s of client.schedule.list({ pageSize: 1_000 })) {
    const job = wanted.get(s.scheduleId);
    if (job !== undefined)
      out.set(job, { paused: s.state.paused, note: s.state.note ?? null, nextFires: s.info.nextActionTimes });
  }
  return out;
}

/** Every job's newest window run, in one statement (an index probe a job). */
async function lastWindowRuns(db: Kysely<Database>, jobs: readonly string[]) {
  const t = ledger(db);
  const rows = await sql<{
    job: string;
    window_start: Date | null;
    outcome: string;
    duration_ms: number | null;
    finished_at: Date;
  }>`
    select j.job, r.window_start, r.outcome, r.duration_ms, r.finished_at
      from unnest(${[...jobs]}::text[]) as j(job)
      join lateral (select window_start, outcome, duration_ms, finished_at from ${t.job_runs}
                     where job = j.job and kind = 'window' order by id desc limit 1) r on true`.execute(db);
  return new Map(rows.rows.map((r) => [r.job, r]));
}

/** Every job's watermark, in one statement. */
export async function readWatermarks(
  db: Kysely<Database>,
  jobs: readonly string[],
): Promise<Map<string, Date>> {
  if (!jobs.length) return new Map();
  const rows = await db
    .selectFrom('job_watermarks')
    .select(['job', 'watermark'])
    .where('job', 'in', [...jobs])
    .execute();
  return new Map(rows.map((r) => [r.job, r.watermark]));
}

/**
 * Every job's row: schedule state, next fires, watermark, lag, last run. A handful of statements and
 * one pass over the schedules for the whole catalog, not a few per job.
 */
export async function jobsOverview(
  db: Kysely<Database>,
  client: Client,
  catalog: Catalog,
  now = new Date(),
  o: {
    schedules?: Map<string, ScheduleState | null> | Promise<Map<string, ScheduleState | null>>;
    /** The jobs' watermarks when the caller reads them already (readWatermarks). */
    watermarks?: Promise<Map<string, Date>>;
  } = {},
) {
  const names = catalog.jobs.map((j) => j.name);
  const [schedules, watermarks, lastRuns] = await Promise.all([
    o.schedules ?? describeSchedules(client, names),
    o.watermarks ?? readWatermarks(db, names),
    names.length ? lastWindowRuns(db, names) : new Map(),
  ]);
  const rows = [];
  for (const job of catalog.jobs) {
    const schedule = schedules.get(job.name) ?? null;
    const watermark = watermarks.get(job.name);
    // A job that never ticked lags from its declared start, as the watch and /metrics count it.
    const from = watermark ?? job.start;
    const last = lastRuns.get(job.name);
    rows.push({
      job: job.name,
      description: job.description,
      grid: job.grid.label,
      timezone: job.timezone,
      schedule: describeTick(job.tick),
      scheduled: schedule !== null,
      paused: schedule?.paused ?? null,
      pauseNote: schedule?.paused ? schedule.note : null,
      // A listed schedule's next fires are as of its last action: the ones passed since are dropped.
      nextFires: (schedule?.nextFires ?? [])
        .filter((t) => t >= now)
        .slice(0, 2)
        .map(isoUtc),
      watermark: watermark ? isoUtc(watermark) : null,
      lagWindows: from ? windowsBehind(job, from, now) : null,
      lastRun: last
        ? {
            window: last.window_start ? isoUtc(last.window_start) : null,
            outcome: last.outcome,
            durationMs: last.duration_ms,
            finishedAt: isoUtc(last.finished_at),
          }
        : null,
      // Backup jobs: the newest restore drill (scheduled or on demand), null when none ran yet.
      ...(backupJobOf(job) ? { lastDrill: await lastDrill(db, job.name) } : {}),
    });
  }
  return rows;
}

/**
 * The job's newest windows in the ledger. Windows whose done markers were compacted into spans
 * (all older than the markers' retention) are not among them: compactedSpans says which.
 */
export async function recentWindows(db: Kysely<Database>, job: string, limit: number) {
  const t = ledger(db);
  const rows = await sql<
    Omit<LedgerRow, 'status'> & {
      window_key: string;
      window_end: Date;
      status: string;
      effects: Record<string, number> | null;
    }
  >`
    select w.window_key, w.window_start, w.window_end, w.generation, w.status, w.attempts, w.duration_ms, w.records_in, w.records_applied, w.records_quarantined, w.reason, w.workflow_id,
           (select jsonb_object_agg(status, n) from (select status, count(*)::int as n from ${t.effects} e where e.window_key = w.window_key group by status) s) as effects
      from ${t.job_windows} w where w.job = ${job} order by w.window_start desc, w.generation desc limit ${limit}`.execute(
    db,
  );
  return rows.rows.map((r) => ({
    window: r.window_key,
    start: isoUtc(r.window_start),
    end: isoUtc(r.window_end),
    generation: r.generation,
    status: r.status,
    attempts: r.attempts,
    durationMs: r.duration_ms,
    input: r.records_in,
    applied: r.records_applied,
    quarantined: r.records_quarantined,
    effects: r.effects ?? {},
    reason: r.reason,
    workflowId: r.workflow_id,
  }));
}

/**
 * The job's newest done spans (windows whose done markers were compacted: recentWindows no longer
 * lists them), newest first, and how many it has in all.
 */
export async function compactedSpans(db: Kysely<Database>, job: string, limit: number) {
  const [rows, all] = await Promise.all([
    db
      .selectFrom('job_done_spans')
      .select(['span_start', 'span_end'])
      .where('job', '=', job)
      .orderBy('span_start', 'desc')
      .limit(limit)
      .execute(),
    db
      .selectFrom('job_done_spans')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .where('job', '=', job)
      .executeTakeFirstOrThrow(),
  ]);
  return {
    spans: rows.map((r) => ({ start: isoUtc(r.span_start), end: isoUtc(r.span_end) })),
    total: Number(all.n),
  };
}

/**
 * A job's newest run records, of one kind or of every kind: newest first (by id). Every kind is
 * read on its own, newest first by the (job, kind, id) index, and the pages merged: a read of the
 * newest across kinds in one statement would sort the job's whole history.
 */
export async function recentRuns(db: Kysely<Database>, job: string, o: { kind?: RunKind; limit: number }) {
  const kinds = o.kind ? [o.kind] : Object.values(RUN_KIND);
  const pages = await Promise.all(
    kinds.map((kind) =>
      db
        .selectFrom('job_runs')
        .selectAll()
        .where('job', '=', job)
        .where('kind', '=', kind)
        .orderBy('id', 'desc')
        .limit(o.limit)
        .execute(),
    ),
  );
  return pages
    .flat()
    .sort((a, b) => (BigInt(b.id) > BigInt(a.id) ? 1 : BigInt(b.id) < BigInt(a.id) ? -1 : 0))
    .slice(0, o.limit);
}
