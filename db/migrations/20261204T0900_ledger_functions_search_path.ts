// The ledger's functions name their tables bare: each resolves them in its own schema, whatever
// search_path the caller's connection has (a job's role may set one). The schema first, pg_temp
// last, as PostgreSQL advises for functions that must not be steered by the caller.
import { sql, type Kysely } from 'kysely';
import { schemaOf, type LedgerFunction } from '../ledger-schema.js';

const FUNCTIONS: readonly LedgerFunction[] = [
  'tidemark_advance_watermark',
  'tidemark_claim_window',
  'tidemark_finish_window',
  'tidemark_fold_effect_counts',
  'tidemark_fold_window_counts',
  'tidemark_count_effects',
  'tidemark_count_windows',
  'tidemark_span_backlog',
];

export async function up(db: Kysely<unknown>): Promise<void> {
  const schema = schemaOf(db);
  for (const name of FUNCTIONS)
    await sql`alter function ${sql.id(schema, name)} set search_path = ${sql.id(schema)}, pg_temp`.execute(
      db,
    );
}
