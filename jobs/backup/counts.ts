// Row counts of the tables a backup job names: taken in the dump's own snapshot, and again after
// a restore (the drill, `tidemark backups restore`) to compare.
import pg from 'pg';

export async function countRows(
  client: pg.Client,
  tables: readonly string[],
): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of tables) {
    const r = await client.query<{ n: string }>(
      `select count(*) as n from ${t
        .split('.')
        .map((p) => pg.escapeIdentifier(p))
        .join('.')}`,
    );
    out[t] = Number(r.rows[0]!.n);
  }
  return out;
}
