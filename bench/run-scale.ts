// Runs only the scale section (bench/scale.ts) and merges its figures into bench/results.json,
// keeping every other figure; then BENCHMARKS.md is rendered from it (`npm run bench -- --render`).
// BENCH_QUICK=1 prints the figures and writes nothing.
import { readFile, writeFile } from 'node:fs/promises';
import { QUICK, type Figure } from './figures.js';
import { scaleFigures } from './scale.js';

const figures = await scaleFigures();
if (QUICK) {
  console.log(JSON.stringify(figures, null, 2));
} else {
  const file = new URL('../bench/results.json', import.meta.url);
  const saved = JSON.parse(await readFile(file, 'utf8')) as { results: Figure[] };
  saved.results = [...saved.results.filter((f) => !f.name.startsWith('scale.')), ...figures];
  await writeFile(file, JSON.stringify(saved, null, 2) + '\n');
  console.log(
    figures
      .map((f) => `${f.name} ${f.value} ${f.unit}${f.ratio === null ? '' : ` ${f.ratio.toFixed(2)}x`}`)
      .join('\n'),
  );
}
process.exit(0);
