// Issue 8 item 15: at most one open (pending or approved) rerun request per window, so the
// generation a request reserves is never handed out twice. Requests left open by the old code
// in twos would block the index: the migration names them instead of choosing one itself.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  const twice = await sql<{ job: string; window_start: Date; requests: string }>`
    select job, window_start, string_agg(workflow_id, ', ' order by requested_at) as requests
      from rerun_requests where status in ('pending', 'approved')
     group by job, window_start having count(*) > 1`.execute(db);
  if (twice.rows.length > 0)
    throw new Error(
      `rerun_requests: windows with more than one open rerun request (${twice.rows
        .map((r) => `${r.job} ${r.window_start.toISOString()}: ${r.requests}`)
        .join('; ')}); reject all but one of each (npx tidemark reject <id>), then start again`,
    );
  await sql`create unique index rerun_requests_one_open on rerun_requests (job, window_start)
              where status in ('pending', 'approved')`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop index rerun_requests_one_open`.execute(db);
}
