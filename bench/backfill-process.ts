// The backfill section (bench/backfill.ts) in a process of its own, started with the worker's Node
// flags (workers/memory.ts) and given its workflow bundle built ahead (here, in the parent), as
// the image runs a worker of the package: `worker.rss_mb` is then that worker's memory, not the
// high-water mark of the sections measured before it in the benchmark's process.
// The child runs compiled JavaScript, as the image's worker does (tsx in a process costs ~30 MiB
// of its resident memory): tsconfig.bench.json compiles this file and what it imports, with the
// package's build options, into .bench-build/. BENCH_WORKER_TSX=1 runs the child under tsx instead.
// Prints its result as one `RESULT <json>` line; bench/run.ts starts it (backfillInWorkerProcess).
// Alone, `tsx bench/backfill-process.ts` runs this section only and prints its figures (sizes from
// BENCH_BACKFILL, BENCH_CONCURRENCY, BENCH_BATCH, BENCH_BATCH_CONCURRENCY, as in bench/backfill.ts).
import { execFileSync, spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findTemporalCli } from '../bin/temporal-cli.js';
import { isEntryPoint } from '../config/entry.js';
import { WORKER_NODE_OPTIONS } from '../workers/memory.js';
import { benchBundle, type BackfillRates } from './backfill.js';

const self = fileURLToPath(import.meta.url);
const root = fileURLToPath(new URL('..', import.meta.url));

/** The child's command: this file compiled (tsconfig.bench.json), or under tsx with BENCH_WORKER_TSX=1. */
function childArgs(): string[] {
  if (process.env.BENCH_WORKER_TSX === '1') return ['--import', 'tsx', self];
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.bench.json')], { stdio: 'inherit' });
  return [join(root, '.bench-build', 'bench', 'backfill-process.js')];
}

/** Runs the backfill section in a child process with the worker's flags; its log lines pass through. */
export async function backfillInWorkerProcess(): Promise<BackfillRates> {
  const bundlePath = join(tmpdir(), `tidemark-bench-workflows-${process.pid}.js`);
  writeFileSync(bundlePath, (await benchBundle()).code);
  try {
    return await inChild(bundlePath);
  } finally {
    rmSync(bundlePath, { force: true });
  }
}

async function inChild(bundlePath: string): Promise<BackfillRates> {
  const child = spawn(process.execPath, childArgs(), {
    env: {
      ...process.env,
      // Found (or installed into .venv) here: the compiled child's own lookup starts from .bench-build/.
      TEMPORAL_CLI: findTemporalCli({ install: true }),
      NODE_OPTIONS: WORKER_NODE_OPTIONS,
      MALLOC_ARENA_MAX: '2',
      BENCH_BACKFILL_CHILD: '1',
      BENCH_WORKFLOW_BUNDLE: bundlePath,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let pending = '';
  let result: string | undefined;
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    const lines = (pending + chunk).split('\n');
    pending = lines.pop()!;
    for (const line of lines)
      if (line.startsWith('RESULT ')) result = line;
      else console.log(line);
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  const line = result ?? (pending.startsWith('RESULT ') ? pending : undefined);
  if (code !== 0 || !line) throw new Error(`the backfill section's process ended with ${code} and no result`);
  return JSON.parse(line.slice('RESULT '.length)) as BackfillRates;
}

if (process.env.BENCH_BACKFILL_CHILD === '1') {
  const { backfillFigures } = await import('./backfill.js');
  const r = await backfillFigures();
  process.stdout.write(`RESULT ${JSON.stringify(r)}\n`, () => process.exit(0));
} else if (isEntryPoint(import.meta.url)) {
  const r = await backfillInWorkerProcess();
  for (const f of r.figures) console.log(`${f.name} ${f.value} ${f.unit}`);
  console.log(`windows/s: per window ${r.perWindow.toFixed(1)}, batched ${r.batched.toFixed(1)}`);
  process.exit(0);
}
