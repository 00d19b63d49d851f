// What housekeeping removes from tidemark's own tables, one small batch at a time: each batch is
// its own short transaction (delete + progress row), so locks and WAL stay small; deletion is
// idempotent, so a batch that ran before a crash is simply not found again.
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { DEFAULT_SCHEMA, ledger } from '../../db/ledger-schema.js';
import type { Database } from '../../db/schema.js';
import { exportQuarantine, QUARANTINE_COLUMNS, type QuarantineRow } from './export.js';

/** The kinds of rows with a retention; each maps to one table. */
export const KINDS = Object.freeze(['runs', 'attempts', 'incidents', 'quarantine'] as const);
export type Kind = (typeof KINDS)[number];

export const TABLE_OF: Readonly<Record<Kind, keyof Database>> = Object.freeze({
  runs: 'job_runs',
  attempts: 'effect_attempts',
  incidents: 'incidents',
  quarantine: 'quarantine',
});

/**
 * Which rows of a kind are old enough to go. Never an unsettled effect's attempts (a `failed`
 * effect is not settled: it waits in the operators' queue with its last attempt, and is driven
 * again), never an open incident.
 */
function doomed(kind: Kind, cutoff: Date, schema: string): RawBuilder<unknown> {
  const t = ledger(schema);
  switch (kind) {
    case 'runs':
      // A job's last run of each kind stays however old (the overview and `status` show it): a run
      // goes only when a run of its job and kind started after it. The newest start is one probe of
      // job_runs_job_idx (job, kind, started_at) per row (`exists` became a hash join over the whole
      // table, 150-200 ms a batch at 1 M rows).
      return sql`finished_at < ${cutoff} and started_at < (select max(n.started_at) from ${t.job_runs} n
        where n.job = job_runs.job and n.kind = job_runs.kind)`;
    case 'attempts':
      return sql`finished_at < ${cutoff} and exists (select 1 from ${t.effects} e
        where e.effect_key = effect_attempts.effect_key and e.status in ('done', 'skipped'))`;
    case 'incidents':
      // Not while one of its alerts is still undelivered (`alert:<id>:...`, driven again until it
      // goes): the outbox reads the incident to tell a channel-down report. One probe of
      // effects_open_idx (status, job).
      return sql`closed_at is not null and closed_at < ${cutoff} and not exists (select 1 from ${t.effects} e
        where e.status in ('pending', 'begun', 'failed', 'unknown') and e.job = incidents.job
          and e.effect_key like 'alert:' || incidents.id || ':%')`;
    case 'quarantine':
      return sql`created_at < ${cutoff}`;
    default: {
      const never: never = kind;
      throw new Error(`unknown kind ${String(never)}`);
    }
  }
}

/**
 * The query that finds a batch of `kind`'s old rows, oldest ids first: an index range on the
 * table's time column (migration 20261201T2200), so the daily scan that finds nothing reads nothing.
 * `schema`: the ledger's (schemaOf(db)).
 */
export function findOld(
  kind: Kind,
  cutoff: Date,
  limit: number,
  columns: RawBuilder<unknown> = sql`id`,
  schema: string = DEFAULT_SCHEMA,
) {
  // `<table>.id`, the column: a bare `id` would be the select list's `id::text` for quarantine.
  const table = ledger(schema)[TABLE_OF[kind]];
  return sql`select ${columns} from ${table} where ${doomed(kind, cutoff, schema)} order by ${table}.id limit ${limit}`;
}

export interface BatchScope {
  readonly db: Kysely<Database>;
  /** The housekeeping window's key: its progress rows. */
  readonly key: string;
  readonly batchSize: number;
  /** Where quarantine is exported before it is removed. */
  readonly exportDir: string;
  /** Test seam: called after a quarantine batch is exported, before its delete. */
  readonly afterExport?: ((files: readonly string[]) => Promise<void>) | undefined;
}

async function record(trx: Kysely<Database>, key: string, table: string, rows: number): Promise<void> {
  await sql`insert into ${ledger(trx).housekeeping_progress} (window_key, tbl, batches, rows) values (${key}, ${table}, 1, ${rows})
    on conflict (window_key, tbl) do update set batches = housekeeping_progress.batches + 1,
      rows = housekeeping_progress.rows + excluded.rows, updated_at = now()`.execute(trx);
}

/** The progress row that says a window stopped at its time budget, with rows left for the next window. */
export const BUDGET_SPENT = '(budget spent)';

export async function markBudgetSpent(db: Kysely<Database>, key: string): Promise<void> {
  await record(db, key, BUDGET_SPENT, 0);
}

/**
 * Removes other windows' progress rows last written before `cutoff` (the longest retention before
 * the window's end): the table stays a few rows per day kept, not one per window forever.
 */
export async function pruneProgress(db: Kysely<Database>, key: string, cutoff: Date): Promise<number> {
  const r =
    await sql`delete from ${ledger(db).housekeeping_progress} where window_key <> ${key} and updated_at < ${cutoff}`.execute(
      db,
    );
  return Number(r.numAffectedRows ?? 0);
}

/** Removes one batch of `kind` older than `cutoff`; returns how many rows went (0: nothing left). */
export async function removeBatch(scope: BatchScope, kind: Kind, cutoff: Date): Promise<number> {
  const table = TABLE_OF[kind];
  if (kind === 'quarantine') return removeQuarantineBatch(scope, cutoff);
  return scope.db.transaction().execute(async (trx) => {
    // `= any(array(...))`, not `in (select ...)`: the planner then deletes by the primary key
    // instead of hash-joining the ids against a scan of the whole table (1 s per batch at 1 M rows).
    const schema = ledger(trx).schema;
    const r = await sql`delete from ${ledger(schema)[table]} where id = any(array(${findOld(
      kind,
      cutoff,
      scope.batchSize,
      sql`id`,
      schema,
    )}))`.execute(trx);
    const n = Number(r.numAffectedRows ?? 0);
    if (n > 0) await record(trx, scope.key, table, n);
    return n;
  });
}

async function removeQuarantineBatch(scope: BatchScope, cutoff: Date): Promise<number> {
  const { rows } = await findOld(
    'quarantine',
    cutoff,
    scope.batchSize,
    QUARANTINE_COLUMNS,
    ledger(scope.db).schema,
  )
    .$castTo<QuarantineRow>()
    .execute(scope.db);
  if (rows.length === 0) return 0;
  const files = await exportQuarantine(scope.exportDir, scope.key, rows);
  await scope.afterExport?.(files);
  const ids = rows.map((r) => r.id);
  return scope.db.transaction().execute(async (trx) => {
    const r = await sql`delete from ${ledger(trx).quarantine} where id = any(${ids}::bigint[])`.execute(trx);
    const n = Number(r.numAffectedRows ?? 0);
    if (n > 0) await record(trx, scope.key, 'quarantine', n);
    return n;
  });
}
