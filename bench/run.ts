// npm run bench: every figure measured in one run on the same PostgreSQL and Temporal dev
// server, each as a ratio to a baseline measured in the same run. Writes BENCHMARKS.md and
// bench/results.json. BENCH_QUICK=1 runs every section at a small size (about a minute).
import { writeFile } from 'node:fs/promises';
import { backfillFigures } from './backfill.js';
import { QUICK, type Figure } from './figures.js';
import { ingestFigures, ledgerFigures, summaryFigures } from './ingest.js';
import { markdown } from './report.js';

const results: Figure[] = [];
const started = Date.now();
for (const section of [ledgerFigures, ingestFigures, summaryFigures, backfillFigures]) {
  results.push(...(await section()));
}
const took = Math.round((Date.now() - started) / 1000);
const out = { date: new Date().toISOString(), quick: QUICK, seconds: took, results };
if (QUICK) {
  // A quick run checks that the benchmark works; its figures are not published.
  console.log(JSON.stringify(out, null, 2));
} else {
  await writeFile(new URL('../bench/results.json', import.meta.url), JSON.stringify(out, null, 2) + '\n');
  await writeFile(new URL('../BENCHMARKS.md', import.meta.url), markdown(results, took));
  console.log(markdown(results, took));
}
process.exit(0);
