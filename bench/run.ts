// npm run bench: measured in one run on the same PostgreSQL and Temporal dev server.
//  1. records/s of the idempotent sales-summary ingest (marker + effect + watermark in one
//     transaction) vs the same statement with no guarantee (ceiling) and vs one transaction
//     per record with a per-record key (the naive way);
//  2. windows/s of a backfill of 8,760 hourly windows vs trivial child workflows run by a
//     parent with the same concurrency (the bare Temporal ceiling).
// Writes BENCHMARKS.md and bench/results.json. Sizes: BENCH_RECORDS, BENCH_WINDOWS, BENCH_PER_WINDOW,
// BENCH_NAIVE, BENCH_BACKFILL, BENCH_CONCURRENCY.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { createActivities } from '../activities/index.js';
import { memoryLogger } from '../activities/logger.js';
import { summariseWindow } from '../jobs/sales-summary.js';
import { defineCatalog } from '../schedules/job.js';
import { isoUtc } from '../schedules/windows.js';
import { findTemporalCli } from '../scripts/temporal-cli.js';
import { createTestDb } from '../test/helpers/db.js';
import { installRuntime } from '../workers/runtime.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import type { BackfillResult } from '../workflows/types.js';

const WINDOWS = Number(process.env.BENCH_WINDOWS ?? 100);
const PER_WINDOW = Number(process.env.BENCH_PER_WINDOW ?? 2_000);
const RECORDS = Number(process.env.BENCH_RECORDS ?? 200_000);
const RECORD_WINDOW_SIZES = [1_000, 5_000, 20_000];
const NAIVE_RECORDS = Number(process.env.BENCH_NAIVE ?? 3_000);
const BACKFILL = Number(process.env.BENCH_BACKFILL ?? 8_760);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const HOUR = 3_600_000;
const T0 = Date.parse('2025-01-01T00:00:00Z');
const POLICY = {
  retry: { maximumAttempts: 1, initialInterval: '1s', maximumInterval: '1s', backoffCoefficient: 1 },
  startToCloseTimeoutMs: 60_000,
};

interface Result {
  name: string;
  value: number;
  unit: string;
  baseline: string | null;
  ratio: number | null;
}
const results: Result[] = [];
const seconds = async (fn: () => Promise<unknown>) => {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
};
const log = (line: string) => console.log(`[bench] ${line}`);

async function ingest(): Promise<void> {
  const t = await createTestDb();
  try {
    const { db } = t;
    const total = WINDOWS * PER_WINDOW;
    log(`loading ${total} orders in ${WINDOWS} hourly windows`);
    await sql`insert into orders (order_key, placed_at, amount)
      select 'o' || n, to_timestamp(${T0 / 1000} + (n / ${PER_WINDOW}) * 3600 + (n % ${PER_WINDOW}) * (3600.0 / ${PER_WINDOW})), (n % 997) / 10.0 + 1
        from generate_series(0, ${total - 1}) n`.execute(db);
    await sql`analyze orders`.execute(db);
    const windowsOf = (i: number) => ({ start: new Date(T0 + i * HOUR), end: new Date(T0 + (i + 1) * HOUR) });

    // Ceiling: the same set-based statement per window, autocommit, no marker, no watermark.
    const plain = await seconds(async () => {
      for (let i = 0; i < WINDOWS; i++) {
        const w = windowsOf(i);
        await sql`insert into daily_sales (job, day, order_count, total)
          select 'plain', (placed_at at time zone 'UTC')::date, count(*), sum(amount) from orders
           where placed_at >= ${w.start} and placed_at < ${w.end} group by 2
          on conflict (job, day) do update set order_count = daily_sales.order_count + excluded.order_count, total = daily_sales.total + excluded.total`.execute(
          db,
        );
      }
    });

    // Idempotent: the real window activity (attempt row, marker claim, handler, counts, watermark, run record).
    const catalog = defineCatalog([
      { name: 'idem', grid: '1h', start: isoUtc(new Date(T0)), handler: summariseWindow },
    ]);
    const acts = createActivities({ db, catalog, logger: memoryLogger(), now: () => new Date() });
    const idem = await seconds(async () => {
      for (let i = 0; i < WINDOWS; i++) {
        const w = windowsOf(i);
        const r = await acts.processWindow({
          job: 'idem',
          start: isoUtc(w.start),
          end: isoUtc(w.end),
          generation: 0,
          key: `idem/${isoUtc(w.start)}`,
          trigger: 'manual',
          policy: POLICY,
        });
        if (r.outcome !== 'processed') throw new Error(`window ${i} not processed`);
      }
    });

    // Naive: one transaction per record, each with its own processed-key row.
    await sql`create table naive_keys (order_key text primary key)`.execute(db);
    const naiveOrders = await db
      .selectFrom('orders')
      .select(['order_key', 'placed_at', 'amount'])
      .orderBy('placed_at')
      .limit(NAIVE_RECORDS)
      .execute();
    const naive = await seconds(async () => {
      for (const o of naiveOrders) {
        await db.transaction().execute(async (trx) => {
          const claimed =
            await sql`insert into naive_keys values (${o.order_key}) on conflict do nothing returning 1`.execute(
              trx,
            );
          if (claimed.rows.length === 0) return;
          await sql`insert into daily_sales (job, day, order_count, total) values ('naive', (${o.placed_at}::timestamptz at time zone 'UTC')::date, 1, ${o.amount})
            on conflict (job, day) do update set order_count = daily_sales.order_count + 1, total = daily_sales.total + excluded.total`.execute(
            trx,
          );
        });
      }
    });

    const check = await db
      .selectFrom('daily_sales')
      .select(['job', (eb) => eb.fn.sum<number>('order_count').as('n')])
      .groupBy('job')
      .execute();
    const counted = Object.fromEntries(check.map((r) => [r.job, Number(r.n)]));
    if (counted.plain !== total || counted.idem !== total || counted.naive !== naiveOrders.length)
      throw new Error(`bench totals wrong: ${JSON.stringify(counted)}`);

    const plainRate = total / plain;
    const idemRate = total / idem;
    const naiveRate = naiveOrders.length / naive;
    results.push(
      {
        name: 'summary.plain_statement',
        value: Math.round(plainRate),
        unit: 'records/s',
        baseline: null,
        ratio: null,
      },
      {
        name: 'summary.naive_per_record_tx',
        value: Math.round(naiveRate),
        unit: 'records/s',
        baseline: null,
        ratio: null,
      },
      {
        name: 'summary.idempotent_vs_plain',
        value: Math.round(idemRate),
        unit: 'records/s',
        baseline: 'summary.plain_statement',
        ratio: idemRate / plainRate,
      },
      {
        name: 'summary.idempotent_vs_naive',
        value: Math.round(idemRate),
        unit: 'records/s',
        baseline: 'summary.naive_per_record_tx',
        ratio: idemRate / naiveRate,
      },
    );
    log(
      `summary: plain ${plainRate.toFixed(0)}/s, idempotent ${idemRate.toFixed(0)}/s, naive ${naiveRate.toFixed(0)}/s`,
    );
  } finally {
    await t.drop();
  }
}

type SourceRow = { order_key: string; placed_at: Date; amount: string };

/** A window of `size` orders as a source system would hand them over: rows in memory. */
function sourceRecords(i: number, size: number): SourceRow[] {
  return Array.from({ length: size }, (_, n) => ({
    order_key: `r${i}-${n}`,
    placed_at: new Date(T0 + i * HOUR + Math.floor((n * HOUR) / size)),
    amount: ((n % 997) / 10 + 1).toFixed(2),
  }));
}

/** One multi-row INSERT per window: the rows travel as three array parameters. */
async function insertRecords(
  db: Kysely<Database> | Transaction<Database>,
  table: string,
  rows: SourceRow[],
): Promise<void> {
  await sql`insert into ${sql.table(table)} (order_key, placed_at, amount)
    select * from unnest(${rows.map((r) => r.order_key)}::text[], ${rows.map((r) => r.placed_at.toISOString())}::timestamptz[], ${rows.map((r) => r.amount)}::numeric[])`.execute(
    db,
  );
}

/** Lands RECORDS records in windows of `size`: plain multi-row INSERTs, then the idempotent activity; returns both rates. */
async function landWindows(db: Kysely<Database>, size: number): Promise<{ plain: number; idem: number }> {
  const count = Math.max(1, Math.floor(RECORDS / size));
  const windows = Array.from({ length: count }, (_, i) => sourceRecords(i, size));
  const plainTable = `facts_plain_${size}`;
  const idemTable = `facts_idem_${size}`;
  for (const table of [plainTable, idemTable]) {
    await sql`create table ${sql.table(table)} (order_key text primary key, placed_at timestamptz not null, amount numeric(14, 2))`.execute(
      db,
    );
  }
  const plain = await seconds(async () => {
    for (const rows of windows) await insertRecords(db, plainTable, rows);
  });
  const job = `land-${size}`;
  const catalog = defineCatalog([
    {
      name: job,
      grid: '1h',
      start: isoUtc(new Date(T0)),
      handler: async (ctx) => {
        const rows = windows[(ctx.window.start.getTime() - T0) / HOUR]!;
        await insertRecords(ctx.trx, idemTable, rows);
        return { input: rows.length, applied: rows.length, quarantined: 0 };
      },
    },
  ]);
  const acts = createActivities({ db, catalog, logger: memoryLogger(), now: () => new Date() });
  const idem = await seconds(async () => {
    for (let i = 0; i < count; i++) {
      const start = isoUtc(new Date(T0 + i * HOUR));
      const r = await acts.processWindow({
        job,
        start,
        end: isoUtc(new Date(T0 + (i + 1) * HOUR)),
        generation: 0,
        key: `${job}/${start}`,
        trigger: 'manual',
        policy: POLICY,
      });
      if (r.outcome !== 'processed') throw new Error(`window ${i} not processed`);
    }
  });
  const c = (
    await sql<{
      p: number;
      i: number;
    }>`select (select count(*) from ${sql.table(plainTable)}) p, (select count(*) from ${sql.table(idemTable)}) i`.execute(
      db,
    )
  ).rows[0]!;
  if (c.p !== count * size || c.i !== count * size)
    throw new Error(`record ingest totals wrong at ${size}/window: ${JSON.stringify(c)}`);
  return { plain: (count * size) / plain, idem: (count * size) / idem };
}

async function recordIngest(): Promise<void> {
  const t = await createTestDb();
  try {
    const { db } = t;
    await sql`create table facts_naive (order_key text primary key, placed_at timestamptz not null, amount numeric(14, 2))`.execute(
      db,
    );
    await sql`create table naive_keys (order_key text primary key)`.execute(db);
    const naiveRows = sourceRecords(0, NAIVE_RECORDS);
    const naiveSeconds = await seconds(async () => {
      for (const o of naiveRows) {
        await db.transaction().execute(async (trx) => {
          const claimed =
            await sql`insert into naive_keys values (${o.order_key}) on conflict do nothing returning 1`.execute(
              trx,
            );
          if (claimed.rows.length > 0)
            await sql`insert into facts_naive values (${o.order_key}, ${o.placed_at}, ${o.amount})`.execute(
              trx,
            );
        });
      }
    });
    const naiveRate = naiveRows.length / naiveSeconds;
    results.push({
      name: 'records.naive_per_record_tx',
      value: Math.round(naiveRate),
      unit: 'records/s',
      baseline: null,
      ratio: null,
    });
    log(`record ingest, naive: ${naiveRate.toFixed(0)}/s`);
    for (const size of RECORD_WINDOW_SIZES) {
      const { plain, idem } = await landWindows(db, size);
      results.push(
        {
          name: `records.plain_multirow_insert@${size}`,
          value: Math.round(plain),
          unit: 'records/s',
          baseline: null,
          ratio: null,
        },
        {
          name: `records.idempotent@${size}_vs_plain`,
          value: Math.round(idem),
          unit: 'records/s',
          baseline: `records.plain_multirow_insert@${size}`,
          ratio: idem / plain,
        },
        {
          name: `records.idempotent@${size}_vs_naive`,
          value: Math.round(idem),
          unit: 'records/s',
          baseline: 'records.naive_per_record_tx',
          ratio: idem / naiveRate,
        },
      );
      log(`record ingest, ${size} per window: plain ${plain.toFixed(0)}/s, idempotent ${idem.toFixed(0)}/s`);
    }
  } finally {
    await t.drop();
  }
}

async function backfill(): Promise<void> {
  installRuntime('WARN');
  const t = await createTestDb();
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTemporalCli({ install: true }) },
      log: { format: 'pretty', level: 'error' },
    },
  });
  try {
    await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
    const bundle = await bundleWorkflowCode({
      workflowsPath: fileURLToPath(new URL('./workflows.ts', import.meta.url)),
      logger: { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} },
    });
    const catalog = defineCatalog([
      { name: 'bf', grid: '1h', start: isoUtc(new Date(T0)), handler: summariseWindow },
    ]);
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue: 'bench',
      workflowBundle: bundle,
      activities: createActivities({ db: t.db, catalog, logger: memoryLogger(), now: () => new Date() }),
      maxConcurrentActivityTaskExecutions: 100,
    });
    await worker.runUntil(async () => {
      log(`bare Temporal: ${BACKFILL} trivial child workflows, ${CONCURRENCY} at once`);
      const bare = await seconds(() =>
        env.client.workflow.execute('bareFanOut', {
          taskQueue: 'bench',
          workflowId: 'bare',
          args: [{ n: BACKFILL, concurrency: CONCURRENCY, prefix: 'trivial' }],
        }),
      );
      log(`backfill: ${BACKFILL} hourly windows, ${CONCURRENCY} at once`);
      let result: BackfillResult | undefined;
      const bf = await seconds(async () => {
        result = (await env.client.workflow.execute('backfill', {
          taskQueue: 'bench',
          workflowId: 'bf',
          args: [
            {
              job: 'bf',
              from: isoUtc(new Date(T0)),
              to: isoUtc(new Date(T0 + BACKFILL * HOUR)),
              concurrency: CONCURRENCY,
            },
          ],
        })) as BackfillResult;
      });
      if (result?.processed !== BACKFILL)
        throw new Error(`backfill processed ${result?.processed}, expected ${BACKFILL}`);
      const bareRate = BACKFILL / bare;
      const bfRate = BACKFILL / bf;
      results.push(
        {
          name: 'temporal.bare_child_workflows',
          value: Number(bareRate.toFixed(1)),
          unit: 'workflows/s',
          baseline: null,
          ratio: null,
        },
        {
          name: 'temporal.backfill_windows',
          value: Number(bfRate.toFixed(1)),
          unit: 'windows/s',
          baseline: 'temporal.bare_child_workflows',
          ratio: bfRate / bareRate,
        },
      );
      log(`bare ${bareRate.toFixed(1)}/s, backfill ${bfRate.toFixed(1)} windows/s`);
    });
  } finally {
    await env.teardown();
    await t.drop();
  }
}

function markdown(): string {
  const row = (r: Result) =>
    `| ${r.name} | ${r.value} ${r.unit} | ${r.baseline ?? '—'} | ${r.ratio === null ? '—' : `${r.ratio.toFixed(2)}x`} |`;
  return [
    '# Benchmarks',
    '',
    `Measured by \`npm run bench\` on ${new Date().toISOString().slice(0, 10)}, one run, one machine (2 cores), the same PostgreSQL 15 and Temporal dev server for every figure.`,
    `Sizes: ${RECORDS} records landed in windows of ${RECORD_WINDOW_SIZES.join(' / ')}; the summary over ${WINDOWS} windows x ${PER_WINDOW} orders; the naive ways on ${NAIVE_RECORDS} records; ${BACKFILL} hourly windows, ${CONCURRENCY} at once, for the backfill.`,
    '',
    '| figure | value | baseline | ratio |',
    '|---|---|---|---|',
    ...results.map(row),
    '',
    'What each figure is:',
    '- `records.*`: landing windows of source records (rows in memory, as a source system hands them over) in a table, at three window sizes.',
    '  `plain_multirow_insert@N` is one multi-row INSERT per window of N records, autocommit, no marker: the ceiling, with no guarantee.',
    '  `idempotent` is the real window activity around the same INSERT: done-marker claim, counts, watermark advance and run record in one transaction per window.',
    '  `naive_per_record_tx` is one transaction per record with a per-record processed key. Aim: idempotent at 0.8x the ceiling or better, 100x the naive way or better.',
    '- `summary.*`: the sales-summary job itself (orders summed per day, one set-based statement per window).',
    "  `plain_statement` is that statement alone, autocommit, no marker; `idempotent` the real activity with the job's handler (plus quarantine);",
    '  `naive_per_record_tx` one transaction per order with a per-order key. The aggregate costs well under a microsecond per order, so the',
    "  activity's fixed cost per window (one transaction of five statements and one commit, about 3 ms here) dominates at this window size.",
    '- `temporal.bare_child_workflows`: trivial child workflows started and completed by a parent with the same concurrency: the orchestration ceiling on this server.',
    '- `temporal.backfill_windows`: the backfill workflow over the same number of hourly windows, each a window child running the real activity against PostgreSQL. Aim: 0.5x the bare rate or better.',
    '',
  ].join('\n');
}

await recordIngest();
await ingest();
if (BACKFILL > 0) await backfill();
await writeFile(
  new URL('../bench/results.json', import.meta.url),
  JSON.stringify({ date: new Date().toISOString(), results }, null, 2) + '\n',
);
await writeFile(new URL('../BENCHMARKS.md', import.meta.url), markdown());
console.log(markdown());
process.exit(0);
