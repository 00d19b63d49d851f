// Flat costs at years of history: the product's hot operations (bench/scale-operations.ts) timed on a
// ledger of one day and on three years of history (a minutely job and two hourly ones), in one run on
// one PostgreSQL and one Temporal dev server. `scale.<op>_ms` is the median over the repetitions on
// three years, its baseline `scale.<op>_day_ms` the same on the last day alone (what the operation
// has to show is there in both: the ratio is what the history adds, as test/system/bench/scale.test.ts
// checks it). Run alone with
// `npx tsx bench/scale.ts` (BENCH_QUICK=1: one year, fewer repetitions, printed only).
import { createTestDb } from '../test/helpers/db.js';
import { benchServer, figure, log, QUICK, sizeFrom, type Figure } from './figures.js';
import { HISTORY_FROM, RECENT_FROM, SCALE_NOW, scaleCatalog, seedHistory } from './scale-ledger.js';
import { operations, type ScaleContext } from './scale-operations.js';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Each operation's median on both ledgers, their repetitions interleaved (one on the day, one on the
 * years, and so on) so that what else the machine does weighs on both alike.
 */
async function timeOps(
  contexts: readonly [ScaleContext, ScaleContext],
  reps: number,
): Promise<[Map<string, number>, Map<string, number>]> {
  const out: [Map<string, number>, Map<string, number>] = [new Map(), new Map()];
  for (const op of operations) {
    for (const ctx of contexts) await op.run(ctx); // warm: plans and pages, as in a process that has run a while
    const ms: [number[], number[]] = [[], []];
    for (let i = 0; i < reps; i++) {
      for (const [k, ctx] of contexts.entries()) {
        const t = performance.now();
        await op.run(ctx);
        ms[k]!.push(performance.now() - t);
      }
    }
    out.forEach((m, k) => m.set(op.name, median(ms[k]!)));
  }
  return out;
}

export async function scaleFigures(): Promise<Figure[]> {
  const reps = sizeFrom('BENCH_SCALE_REPS', 21, 5);
  const from = QUICK ? new Date(SCALE_NOW.getTime() - 365 * 86_400_000) : HISTORY_FROM;
  const env = await benchServer();
  const [day, big] = await Promise.all([createTestDb(), createTestDb()]);
  try {
    const catalog = scaleCatalog();
    const now = new Date(SCALE_NOW.getTime() + 10 * 60_000);
    await seedHistory(day.db, RECENT_FROM, SCALE_NOW);
    const t = performance.now();
    await seedHistory(big.db, from, SCALE_NOW, (line) => log(`scale seed ${line}`));
    const seedS = (performance.now() - t) / 1000;
    const sizes = await big.db
      .selectFrom('job_windows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    log(`scale: ${sizes.n} windows seeded in ${seedS.toFixed(1)} s`);
    const [base, years] = await timeOps(
      [
        { db: day.db, client: env.client, catalog, now },
        { db: big.db, client: env.client, catalog, now },
      ],
      reps,
    );
    const figures: Figure[] = [
      figure('scale.seed_s', seedS, 's'),
      figure('scale.windows', Number(sizes.n), 'windows'),
    ];
    for (const op of operations) {
      const b = base.get(op.name)!;
      figures.push(figure(`scale.${op.name}_day_ms`, b, 'ms'));
      figures.push(
        figure(`scale.${op.name}_ms`, years.get(op.name)!, 'ms', {
          name: `scale.${op.name}_day_ms`,
          value: b,
        }),
      );
    }
    return figures;
  } finally {
    await day.drop();
    await big.drop();
    await env.teardown();
  }
}
