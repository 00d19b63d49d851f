// Job kind "nightly batch": raw events rolled up into daily aggregates, in chunks. Each chunk
// commits its partial result with its checkpoint, so a worker killed in the middle resumes at
// the last chunk; the final aggregates replace the day's rows together with the window's done
// marker, so the result equals an uninterrupted run. Runs only inside its allowed hours.
import { sql } from 'kysely';
import { demo, DEMO_SCHEMA } from './demo-schema.js';
import type { JobSpec, WindowHandler, WindowPreparer } from '../schedules/job.js';

export interface EventRollupOptions extends Omit<JobSpec, 'handler' | 'seed' | 'prepare'> {
  /** Events per chunk (by id range); default 10,000. */
  chunkSize?: number;
  /** Test seam: called after each chunk's checkpoint commits. */
  afterChunk?: (chunk: number) => void | Promise<void>;
}

export function eventRollup(opts: EventRollupOptions): JobSpec {
  const { chunkSize = 10_000, afterChunk, ...spec } = opts;

  const prepare: WindowPreparer = async ({ db, job, window, key, heartbeat, log }) => {
    const bounds = await db
      .withSchema(DEMO_SCHEMA)
      .selectFrom('raw_events')
      .select(({ fn }) => [fn.min<string>('id').as('lo'), fn.max<string>('id').as('hi')])
      .where('occurred_at', '>=', window.start)
      .where('occurred_at', '<', window.end)
      .executeTakeFirstOrThrow();
    if (bounds.lo === null || bounds.hi === null) return;
    const [lo, hi] = [Number(bounds.lo), Number(bounds.hi)];
    const chunks = Math.floor((hi - lo) / chunkSize) + 1;
    const done = new Set(
      (
        await db
          .withSchema(DEMO_SCHEMA)
          .selectFrom('batch_checkpoints')
          .select('chunk')
          .where('window_key', '=', key)
          .execute()
      ).map((r) => r.chunk),
    );
    if (done.size > 0)
      log(
        `ROLLUP job=${job.name} window=${key} resuming: ${done.size} of ${chunks} chunks already committed`,
      );
    for (let chunk = 0; chunk < chunks; chunk++) {
      if (done.has(chunk)) continue;
      const [from, to] = [lo + chunk * chunkSize, lo + (chunk + 1) * chunkSize];
      await db.transaction().execute(async (trx) => {
        const r = await sql<{ n: number }>`
          with part as (
            insert into ${demo.batch_partials} (window_key, chunk, day, kind, events, total)
            select ${key}, ${chunk}, (occurred_at at time zone ${job.timezone})::date, kind, count(*), sum(value)
              from ${demo.raw_events}
             where id >= ${from} and id < ${to} and occurred_at >= ${window.start} and occurred_at < ${window.end}
             group by 3, 4
            returning events
          )
          select coalesce(sum(events), 0)::int as n from part`.execute(trx);
        await trx
          .withSchema(DEMO_SCHEMA)
          .insertInto('batch_checkpoints')
          .values({ window_key: key, chunk, rows: r.rows[0]!.n })
          .execute();
      });
      log(`CHUNK job=${job.name} window=${key} chunk=${chunk + 1}/${chunks}`);
      heartbeat({ chunk });
      await afterChunk?.(chunk);
    }
  };

  const handler: WindowHandler = async ({ trx, job, key }) => {
    const merged = await sql<{ events: number }>`
      with totals as (
        select day, kind, sum(events)::int as events, sum(total) as total from ${demo.batch_partials} where window_key = ${key} group by day, kind
      ), written as (
        insert into ${demo.daily_event_stats} (job, day, kind, events, total)
        select ${job.name}, day, kind, events, total from totals
        on conflict (job, day, kind) do update set events = excluded.events, total = excluded.total
        returning events
      )
      select coalesce(sum(events), 0)::int as events from written`.execute(trx);
    await trx.withSchema(DEMO_SCHEMA).deleteFrom('batch_partials').where('window_key', '=', key).execute();
    await trx.withSchema(DEMO_SCHEMA).deleteFrom('batch_checkpoints').where('window_key', '=', key).execute();
    const n = merged.rows[0]!.events;
    return { input: n, applied: n, quarantined: 0 };
  };

  return {
    description: 'Raw events rolled up into daily aggregates, in chunks',
    heartbeatTimeout: '1m',
    ...spec,
    prepare,
    handler,
  };
}
