// The counts kept as windows and effects change (migration 20261201T2000): insert-only delta rows
// that readers sum. Folding sums each key's rows into one; it skips rows another fold holds, so it
// never waits and never makes a window commit wait.
import { sql, type Kysely } from 'kysely';
import { ledger } from './ledger-schema.js';
import type { Database } from './schema.js';

/** Folds every job's window counts and the effect counts; returns how many delta rows were left. */
export async function foldCounts(db: Kysely<Database>): Promise<number> {
  const t = ledger(db);
  await sql`select ${t.fn('tidemark_fold_window_counts')}(j.job) from (select distinct job from ${t.job_window_counts}) j`.execute(
    db,
  );
  await sql`select ${t.fn('tidemark_fold_effect_counts')}()`.execute(db);
  const left = await sql<{ n: number }>`
    select (select count(*) from ${t.job_window_counts})::int + (select count(*) from ${t.effect_counts})::int as n`.execute(
    db,
  );
  return left.rows[0]?.n ?? 0;
}
