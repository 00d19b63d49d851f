// A job's recent window runs and how long each took, for the page's sparkline. Runs that found the
// window already done (skipped in a moment) would only flatten it, so they are left out.
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { RunDuration } from '../charts/sparkline.js';
import { isoUtc } from '../contract/window-key.js';

/** The last `limit` processed or failed window runs of `job`, oldest first. */
export async function recentDurations(db: Kysely<Database>, job: string, limit = 48): Promise<RunDuration[]> {
  const rows = await db
    .selectFrom('job_runs')
    .select(['window_start', 'generation', 'outcome', 'duration_ms', 'finished_at'])
    .where('job', '=', job)
    .where('kind', '=', 'window')
    .where('outcome', 'in', ['processed', 'failed'])
    .orderBy('id', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse().map((r) => ({
    window: r.window_start ? isoUtc(r.window_start) : null,
    generation: r.generation,
    outcome: r.outcome as RunDuration['outcome'],
    durationMs: r.duration_ms,
    finishedAt: isoUtc(r.finished_at),
  }));
}
