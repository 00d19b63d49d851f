// Flat costs at years of history: the product's hot operations (bench/scale-ledger.ts) timed on an
// empty ledger and on three years of history (a minutely job and two hourly ones), in one run on
// one PostgreSQL and one Temporal dev server. `scale.<op>_ms` is the median over the repetitions on
// three years, its baseline `scale.<op>_empty_ms` the same on the empty ledger. Run alone with
// `npx tsx bench/scale.ts` (BENCH_QUICK=1: one year, fewer repetitions, printed only).
import { createTestDb } from '../test/helpers/db.js';
import { benchServer, figure, log, QUICK, sizeFrom, type Figure } from './figures.js';
import {
  HISTORY_FROM,
  operations,
  SCALE_NOW,
  scaleCatalog,
  seedHistory,
  type ScaleContext,
} from './scale-ledger.js';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function timeOps(ctx: ScaleContext, reps: number): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const op of operations) {
    await op.run(ctx); // warm: plans and pages, as in a process that has run a while
    const ms: number[] = [];
    for (let i = 0; i < reps; i++) {
      const t = performance.now();
      await op.run(ctx);
      ms.push(performance.now() - t);
    }
    out.set(op.name, median(ms));
  }
  return out;
}

export async function scaleFigures(): Promise<Figure[]> {
  const reps = sizeFrom('BENCH_SCALE_REPS', 21, 5);
  const from = QUICK ? new Date(SCALE_NOW.getTime() - 365 * 86_400_000) : HISTORY_FROM;
  const env = await benchServer();
  const [empty, big] = await Promise.all([createTestDb(), createTestDb()]);
  try {
    const catalog = scaleCatalog();
    const now = new Date(SCALE_NOW.getTime() + 10 * 60_000);
    const t = performance.now();
    await seedHistory(big.db, from, SCALE_NOW, (line) => log(`scale seed ${line}`));
    const seedS = (performance.now() - t) / 1000;
    const sizes = await big.db
      .selectFrom('job_windows')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    log(`scale: ${sizes.n} windows seeded in ${seedS.toFixed(1)} s`);
    const base = await timeOps({ db: empty.db, client: env.client, catalog, now }, reps);
    const years = await timeOps({ db: big.db, client: env.client, catalog, now }, reps);
    const figures: Figure[] = [
      figure('scale.seed_s', seedS, 's'),
      figure('scale.windows', Number(sizes.n), 'windows'),
    ];
    for (const op of operations) {
      const b = base.get(op.name)!;
      figures.push(figure(`scale.${op.name}_empty_ms`, b, 'ms'));
      figures.push(
        figure(`scale.${op.name}_ms`, years.get(op.name)!, 'ms', {
          name: `scale.${op.name}_empty_ms`,
          value: b,
        }),
      );
    }
    return figures;
  } finally {
    await empty.drop();
    await big.drop();
    await env.teardown();
  }
}
