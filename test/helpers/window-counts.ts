// What the history says of a job's hourly windows [0, 10) (the query the overview ran before the
// kept counts): latest generations, spans, closed windows. The truth the kept counts are held to.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { tm } from './db.js';

export async function countsFromHistory(db: Kysely<Database>, job: string) {
  const r = await sql<{ done: number; failed: number; recorded: number }>`
    with latest as (select distinct on (window_start) window_start, status from ${tm.job_windows}
                     where job = ${job} order by window_start, generation desc),
    spans as (select coalesce(sum(extract(epoch from span_end - span_start) / 3600), 0)::int as n
                from ${tm.job_done_spans} where job = ${job})
    select (select count(*) from latest where status = 'done')::int + (select n from spans) as done,
           (select count(*) from latest where status = 'failed')::int as failed,
           (select count(*) from latest)::int + (select n from spans) as recorded`.execute(db);
  const { done, failed, recorded } = r.rows[0]!;
  return { done, failed, missing: 10 - recorded };
}
