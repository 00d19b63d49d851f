// What the housekeeping job removed per window and table: each small delete batch adds to its
// row in the batch's own transaction, so the window's report survives a retry and counts once.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`create table housekeeping_progress (
    window_key text not null,
    tbl text not null,
    batches integer not null default 0,
    rows bigint not null default 0,
    updated_at timestamptz not null default now(),
    primary key (window_key, tbl)
  )`.execute(db);
}
