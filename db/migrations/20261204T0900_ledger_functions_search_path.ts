// The ledger's functions name their tables bare: each resolves them in its own schema, whatever
// search_path the caller's connection has (a job's role may set one). The schema first, pg_temp
// last, as PostgreSQL advises for functions that must not be steered by the caller. It imports no
// file of the project (its text is all it runs): the schema is the one migrate() runs it in, the
// first of its transaction's search_path.
import { sql, type Kysely } from 'kysely';

const FUNCTIONS: readonly string[] = [
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
  const r = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db);
  const schema = r.rows[0]?.schema;
  if (!schema)
    throw new Error('run by migrate() (db/database.ts), with the ledger schema as its search_path');
  for (const name of FUNCTIONS)
    await sql`alter function ${sql.id(schema, name)} set search_path = ${sql.id(schema)}, pg_temp`.execute(
      db,
    );
}
