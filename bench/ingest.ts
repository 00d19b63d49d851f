// What the guarantee costs a window in PostgreSQL, each against the same work done with no
// guarantee in the same run:
//  - landing source records (rows in memory) at 1k / 5k / 20k per window: a plain multi-row
//    INSERT, COPY, and the real window activity whose handler COPYs them (ctx.copyRows);
//  - the sales summary (one set-based statement per window) against that statement alone;
//  - the ledger's fixed cost per window, broken down by statement.
// Each variant runs three times, interleaved, and the median counts.
import { sql, type Kysely, type QueryExecutorProvider } from 'kysely';
import type pg from 'pg';
import { withConnection } from '../db/connection.js';
import { copyRows } from '../db/copy.js';
import { poolOf } from '../db/database.js';
import { watermarkOf } from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import { demo } from '../jobs/demo-schema.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import type { WindowHandler } from '../schedules/job.js';
import { createTestDb } from '../test/helpers/db.js';
import { directActivities, hourlyJob, hourlyWindow, windowPolicy } from '../test/helpers/windows.js';
import { figure, log, seconds, sizeFrom, type Figure } from './figures.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2025-01-01T00:00:00Z');
const REPS = 3;
const POLICY = windowPolicy(1, 60_000);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

type Row = [key: string, placedAt: Date, amount: string];

/** A window of `size` orders as a source system hands them over: rows in memory. */
function sourceRows(i: number, size: number): Row[] {
  return Array.from({ length: size }, (_, n) => [
    `r${i}-${n}`,
    new Date(T0 + i * HOUR + Math.floor((n * HOUR) / size)),
    ((n % 997) / 10 + 1).toFixed(2),
  ]);
}

/** One multi-row INSERT: the rows travel as three array parameters. */
async function insertRows(db: QueryExecutorProvider, table: string, rows: Row[]): Promise<void> {
  await sql`insert into ${sql.table(table)} (order_key, placed_at, amount)
    select * from unnest(${rows.map((r) => r[0])}::text[], ${rows.map((r) => r[1].toISOString())}::timestamptz[], ${rows.map((r) => r[2])}::numeric[])`.execute(
    db,
  );
}

const COLUMNS = ['order_key', 'placed_at', 'amount'];

/** The schema of the bench's own tables (as a job's own tables: neither the ledger's nor the demo's). */
const OWN = 'public';

/** Runs `windows` window activities of a job with `handler`, one after another; throws unless each processed. */
async function runWindows(
  db: Kysely<Database>,
  job: string,
  windows: number,
  handler: WindowHandler,
): Promise<void> {
  const acts = directActivities(db, [hourlyJob(job, T0, handler)]);
  await watermarkOf(db, job, new Date(T0));
  for (let i = 0; i < windows; i++) {
    const r = await acts.processWindow(hourlyWindow(job, T0, i, POLICY));
    if (r.outcome !== 'processed') throw new Error(`${job}: window ${i} not processed`);
  }
}

async function countOf(db: Kysely<Database>, table: string): Promise<number> {
  return (await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)}`.execute(db)).rows[0]!
    .n;
}

/** Records/s of each way of landing RECORDS records in windows of `size`. */
async function landWindows(db: Kysely<Database>, size: number, records: number) {
  const count = Math.max(1, Math.floor(records / size));
  const windows = Array.from({ length: count }, (_, i) => sourceRows(i, size));
  const total = count * size;
  const rates = {
    insert: [] as number[],
    copy: [] as number[],
    idemCopy: [] as number[],
    idemInsert: [] as number[],
  };
  for (let rep = 0; rep < REPS; rep++) {
    const tables = Object.fromEntries(
      Object.keys(rates).map((k) => [k, `${OWN}.facts_${k.toLowerCase()}_${size}_${rep}`]),
    ) as Record<keyof typeof rates, string>;
    for (const table of Object.values(tables)) {
      await sql`create table ${sql.table(table)} (order_key text primary key, placed_at timestamptz not null, amount numeric(14, 2))`.execute(
        db,
      );
    }
    const windowRows = (ctx: { window: { start: Date } }) =>
      windows[(ctx.window.start.getTime() - T0) / HOUR]!;
    const took = {
      insert: await seconds(async () => {
        for (const rows of windows) await insertRows(db, tables.insert, rows);
      }),
      copy: await seconds(() =>
        withConnection(db, async (_conn, client) => {
          for (const rows of windows) await copyRows(client, tables.copy, COLUMNS, rows);
        }),
      ),
      idemCopy: await seconds(() =>
        runWindows(db, `copy-${size}-${rep}`, count, async (ctx) => {
          const n = await ctx.copyRows(tables.idemCopy, COLUMNS, windowRows(ctx));
          return { input: n, applied: n, quarantined: 0 };
        }),
      ),
      idemInsert: await seconds(() =>
        runWindows(db, `insert-${size}-${rep}`, count, async (ctx) => {
          const rows = windowRows(ctx);
          await insertRows(ctx.trx, tables.idemInsert, rows);
          return { input: rows.length, applied: rows.length, quarantined: 0 };
        }),
      ),
    };
    for (const k of Object.keys(rates) as (keyof typeof rates)[]) {
      const landed = await countOf(db, tables[k]);
      if (landed !== total) throw new Error(`ingest ${k} at ${size}/window landed ${landed} of ${total}`);
      rates[k].push(total / took[k]);
      await sql`drop table ${sql.table(tables[k])}`.execute(db);
    }
  }
  return {
    insert: median(rates.insert),
    copy: median(rates.copy),
    idemCopy: median(rates.idemCopy),
    idemInsert: median(rates.idemInsert),
  };
}

/** One transaction per record with a per-record processed key: the naive way. */
async function naiveRate(db: Kysely<Database>, records: number): Promise<number> {
  await sql`create table ${sql.table(`${OWN}.facts_naive`)} (order_key text primary key, placed_at timestamptz not null, amount numeric(14, 2))`.execute(
    db,
  );
  await sql`create table ${sql.table(`${OWN}.naive_keys`)} (order_key text primary key)`.execute(db);
  const rows = sourceRows(0, records);
  const took = await seconds(async () => {
    for (const [key, at, amount] of rows) {
      await db.transaction().execute(async (trx) => {
        const claimed =
          await sql`insert into ${sql.table(`${OWN}.naive_keys`)} values (${key}) on conflict do nothing returning 1`.execute(
            trx,
          );
        if (claimed.rows.length > 0)
          await sql`insert into ${sql.table(`${OWN}.facts_naive`)} values (${key}, ${at}, ${amount})`.execute(
            trx,
          );
      });
    }
  });
  return rows.length / took;
}

export async function ingestFigures(): Promise<Figure[]> {
  const records = sizeFrom('BENCH_RECORDS', 200_000, 20_000);
  const sizes = [1_000, 5_000, 20_000].filter((s) => s <= records);
  const t = await createTestDb();
  const out: Figure[] = [];
  try {
    const naive = naiveRate(t.db, sizeFrom('BENCH_NAIVE', 3_000, 500));
    const naiveFig = figure('ingest.naive_per_record_tx', await naive, 'records/s');
    out.push(naiveFig);
    for (const size of sizes) {
      const r = await landWindows(t.db, size, records);
      const plain = figure(`ingest.plain_insert@${size}`, r.insert, 'records/s');
      const copy = figure(`ingest.copy@${size}`, r.copy, 'records/s');
      out.push(
        plain,
        copy,
        figure(`ingest.vs_plain@${size}`, r.idemCopy, 'records/s', plain),
        figure(`ingest.vs_copy@${size}`, r.idemCopy, 'records/s', copy),
        figure(`ingest.insert_path_vs_plain@${size}`, r.idemInsert, 'records/s', plain),
      );
      if (size === 1_000) out.push(figure('ingest.vs_naive@1000', r.idemCopy, 'records/s', naiveFig));
      log(
        `ingest at ${size}/window: insert ${r.insert.toFixed(0)}/s, copy ${r.copy.toFixed(0)}/s, ` +
          `guarded copy ${r.idemCopy.toFixed(0)}/s, guarded insert ${r.idemInsert.toFixed(0)}/s`,
      );
    }
  } finally {
    await t.drop();
  }
  return out;
}

/** The sales summary's windows/s: its statement alone (autocommit), the real activity, the naive way. */
export async function summaryFigures(): Promise<Figure[]> {
  const windows = sizeFrom('BENCH_WINDOWS', 100, 20);
  const perWindow = sizeFrom('BENCH_PER_WINDOW', 2_000, 2_000);
  const t = await createTestDb();
  try {
    const { db } = t;
    const total = windows * perWindow;
    log(`summary: ${total} orders in ${windows} hourly windows`);
    await sql`insert into ${demo.orders} (order_key, placed_at, amount)
      select 'o' || n, to_timestamp(${T0 / 1000} + (n / ${perWindow}) * 3600 + (n % ${perWindow}) * (3600.0 / ${perWindow})), (n % 997) / 10.0 + 1
        from generate_series(0, ${total - 1}) n`.execute(db);
    await sql`analyze ${demo.orders}`.execute(db);
    const plain: number[] = [];
    const idem: number[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      plain.push(
        total /
          (await seconds(async () => {
            for (let i = 0; i < windows; i++) {
              const start = new Date(T0 + i * HOUR);
              const end = new Date(T0 + (i + 1) * HOUR);
              await sql`insert into ${demo.daily_sales} (job, day, order_count, total)
                select ${`plain-${rep}`}, (placed_at at time zone 'UTC')::date, count(*), sum(amount) from ${demo.orders}
                 where placed_at >= ${start} and placed_at < ${end} group by 2
                on conflict (job, day) do update set order_count = daily_sales.order_count + excluded.order_count, total = daily_sales.total + excluded.total`.execute(
                db,
              );
            }
          })),
      );
      idem.push(total / (await seconds(() => runWindows(db, `idem-${rep}`, windows, summariseWindow))));
    }
    const sums = await sql<{ job: string; n: number }>`
      select job, sum(order_count)::int as n from ${demo.daily_sales} group by job`.execute(db);
    for (const { job, n } of sums.rows)
      if (n !== total) throw new Error(`summary ${job} counted ${n} of ${total}`);
    const plainFig = figure('summary.plain_statement', median(plain), 'records/s');
    log(`summary: statement ${median(plain).toFixed(0)}/s, guarded ${median(idem).toFixed(0)}/s`);
    return [plainFig, figure('summary.vs_plain', median(idem), 'records/s', plainFig)];
  } finally {
    await t.drop();
  }
}

/** The statements of one window as the activity sends them, with the time each took (ms). */
function recordStatements(pool: pg.Pool, into: { text: string; ms: number }[]): () => void {
  const wrap = (client: pg.PoolClient) => {
    const query = client.query as ((...a: unknown[]) => unknown) & { timed?: boolean };
    if (query.timed) return;
    const timed = function (this: pg.PoolClient, ...args: unknown[]) {
      const text = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string })?.text);
      const t = performance.now();
      const done = () => into.push({ text: text.trim(), ms: performance.now() - t });
      const r = query.apply(this, args) as Promise<unknown>;
      return r && typeof r.then === 'function' ? r.finally(done) : r;
    } as typeof client.query & { timed?: boolean };
    timed.timed = true;
    client.query = timed;
  };
  pool.on('acquire', wrap);
  return () => pool.off('acquire', wrap);
}

/**
 * The ledger's fixed cost per window: the activity with a one-statement handler minus that
 * statement alone (autocommit), and where it goes (each ledger statement's round trip, and the
 * rest: the activity's own code and kysely).
 */
export async function ledgerFigures(): Promise<Figure[]> {
  const windows = sizeFrom('BENCH_LEDGER_WINDOWS', 2_000, 300);
  const t = await createTestDb();
  try {
    const { db } = t;
    await sql`create table ${sql.table(`${OWN}.probe`)} (k integer primary key, v integer)`.execute(db);
    const stmt = (k: number) => sql`insert into ${sql.table(`${OWN}.probe`)} values (${k}, 1)`;
    const alone: number[] = [];
    const guarded: number[] = [];
    const parts = new Map<string, number[]>();
    for (let rep = 0; rep < REPS; rep++) {
      await sql`truncate ${sql.table(`${OWN}.probe`)}`.execute(db);
      alone.push(
        (await seconds(async () => {
          for (let i = 0; i < windows; i++) await stmt(i).execute(db);
        })) / windows,
      );
      await sql`truncate ${sql.table(`${OWN}.probe`)}`.execute(db);
      const sent: { text: string; ms: number }[] = [];
      const stop = rep === REPS - 1 ? recordStatements(poolOf(db), sent) : () => undefined;
      try {
        guarded.push(
          (await seconds(() =>
            runWindows(db, `ledger-${rep}`, windows, async (ctx) => {
              await stmt((ctx.window.start.getTime() - T0) / HOUR).execute(ctx.trx);
              return { input: 1, applied: 1, quarantined: 0 };
            }),
          )) / windows,
        );
      } finally {
        stop();
      }
      for (const s of sent) {
        const kind = s.text.startsWith(`insert into "${OWN}"."probe"`)
          ? 'handler'
          : s.text.includes('tidemark_claim_window')
            ? 'claim'
            : s.text.includes('tidemark_finish_window')
              ? 'finish'
              : s.text.startsWith('begin')
                ? 'begin'
                : s.text.startsWith('commit')
                  ? 'commit'
                  : 'other';
        parts.set(kind, [...(parts.get(kind) ?? []), s.ms]);
      }
    }
    const statementMs = median(alone) * 1000;
    const fixedMs = (median(guarded) - median(alone)) * 1000;
    const base = figure('ledger.statement_ms', statementMs, 'ms');
    const out = [base, figure('ledger.fixed_ms', fixedMs, 'ms', base)];
    const per = (k: string) => (parts.get(k) ?? []).reduce((a, b) => a + b, 0) / windows;
    let measured = 0;
    for (const k of ['begin', 'claim', 'finish', 'commit']) {
      out.push(figure(`ledger.${k}_ms`, per(k), 'ms', base));
      measured += per(k);
    }
    // The commit's round trip includes the flush the statement alone pays too: the rest is code.
    out.push(
      figure('ledger.other_ms', Math.max(0, fixedMs + statementMs - per('handler') - measured), 'ms', base),
    );
    log(`ledger: ${fixedMs.toFixed(3)} ms a window over a ${statementMs.toFixed(3)} ms statement`);
    return out;
  } finally {
    await t.drop();
  }
}
