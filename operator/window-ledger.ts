// What the ledger holds of a job's windows, as the grid and the detail read it: every
// generation's row (one range scan of the primary key), a compacted window's row, and where the
// job's first window starts.
import type { Kysely, Transaction } from 'kysely';
import { readWatermark } from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import type { Job } from '../schedules/job.js';

/** A window's ledger row of one generation, as the grid and the detail read it. */
export interface LedgerRow {
  window_start: Date;
  generation: number;
  status: 'done' | 'failed';
  attempts: number;
  duration_ms: number | null;
  records_in: number | null;
  records_applied: number | null;
  records_quarantined: number | null;
  reason: string | null;
  workflow_id: string | null;
}

/** The row of a window whose marker was compacted: done at generation 0, its counts no longer kept. */
export function compactedRow(start: Date): LedgerRow {
  return {
    window_start: start,
    generation: 0,
    status: 'done',
    attempts: 1,
    duration_ms: null,
    records_in: null,
    records_applied: null,
    records_quarantined: null,
    reason: null,
    workflow_id: null,
  };
}

/** Every generation's ledger row of the job's windows starting in [from, to): one range scan of the primary key. */
export function ledgerRows(db: Kysely<Database> | Transaction<Database>, job: string, from: Date, to: Date) {
  return db
    .selectFrom('job_windows')
    .select([
      'window_start',
      'generation',
      'status',
      'attempts',
      'duration_ms',
      'records_in',
      'records_applied',
      'records_quarantined',
      'reason',
      'workflow_id',
    ])
    .where('job', '=', job)
    .where('window_start', '>=', from)
    .where('window_start', '<', to);
}

/**
 * The start of the job's first window: its declared start, else the earliest it has in the ledger
 * or its watermark (where its first tick began), whichever is earlier; undefined when no tick has
 * seen the job yet. Two primary-key lookups.
 */
export async function firstWindowOf(db: Kysely<Database>, job: Job): Promise<Date | undefined> {
  if (job.start) return job.start;
  const [ledger, span, watermark] = await Promise.all([
    db
      .selectFrom('job_windows')
      .select('window_start')
      .where('job', '=', job.name)
      .orderBy('window_start')
      .limit(1)
      .executeTakeFirst(),
    db
      .selectFrom('job_done_spans')
      .select('span_start')
      .where('job', '=', job.name)
      .orderBy('span_start')
      .limit(1)
      .executeTakeFirst(),
    readWatermark(db, job.name),
  ]);
  const starts = [ledger?.window_start, span?.span_start, watermark].filter(
    (t): t is Date => t !== undefined,
  );
  return starts.length ? new Date(Math.min(...starts.map((t) => t.getTime()))) : undefined;
}
