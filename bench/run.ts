// npm run bench: every figure measured in one run on the same PostgreSQL and Temporal dev
// server, each as a ratio to a baseline measured in the same run. Writes BENCHMARKS.md and
// bench/results.json. BENCH_QUICK=1 runs every section at a small size (about two minutes) and
// prints the figures without writing them. `npm run bench -- --render` writes BENCHMARKS.md
// again from bench/results.json, measuring nothing.
import { readFile, writeFile } from 'node:fs/promises';
import { backfillInWorkerProcess } from './backfill-process.js';
import { killFigures, peerFigures } from './compare.js';
import { QUICK, withSeparateSections, type Figure } from './figures.js';
import { ingestFigures, ledgerFigures, summaryFigures } from './ingest.js';
import { latencyFigures } from './latency.js';
import { markdown } from './report.js';
import { scaleFigures } from './scale.js';

if (process.argv.includes('--render')) {
  const saved = JSON.parse(await readFile(new URL('../bench/results.json', import.meta.url), 'utf8')) as {
    date: string;
    seconds: number;
    results: Figure[];
    kill_tests?: string[];
  };
  await writeFile(
    new URL('../BENCHMARKS.md', import.meta.url),
    markdown(saved.results, saved.seconds, saved.kill_tests ?? [], saved.date),
  );
  process.exit(0);
}

const started = Date.now();
const results: Figure[] = [
  ...(await ledgerFigures()),
  ...(await ingestFigures()),
  ...(await summaryFigures()),
];
const backfill = await backfillInWorkerProcess();
results.push(...backfill.figures, ...(await peerFigures(backfill)));
const kills = await killFigures();
results.push(...kills.figures, ...(await latencyFigures()), ...(await scaleFigures()));
const took = Math.round((Date.now() - started) / 1000);
const file = new URL('../bench/results.json', import.meta.url);
const saved = await readFile(file, 'utf8')
  .then((t) => (JSON.parse(t) as { results: Figure[] }).results)
  .catch(() => [] as Figure[]);
const all = withSeparateSections(results, saved);
const out = {
  date: new Date().toISOString(),
  quick: QUICK,
  seconds: took,
  results: all,
  kill_tests: kills.notes,
};
if (QUICK) {
  console.log(JSON.stringify(out, null, 2));
} else {
  await writeFile(file, JSON.stringify(out, null, 2) + '\n');
  await writeFile(new URL('../BENCHMARKS.md', import.meta.url), markdown(all, took, kills.notes));
  console.log(markdown(all, took, kills.notes));
}
process.exit(0);
