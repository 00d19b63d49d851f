// `npm run chaos`: the fault-injection run. CHAOS_FAULTS (default 500), CHAOS_SEED (default
// random), CHAOS_LANES (default 10); `--soak 30m` for continuous faults for a duration instead.
// Writes RELIABILITY.md and reliability/results.json; exits 1 when any invariant was broken.
import { fileURLToPath } from 'node:url';
import { parseDuration } from '../schedules/duration.js';
import { runChaos } from './driver.js';
import { clean, writeReports } from './report.js';

function fail(message: string): never {
  console.error(`npm run chaos: ${message}`);
  process.exit(2);
}

function intFrom(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) fail(`${name}="${raw}" must be a whole number of at least ${min}`);
  return n;
}

const args = process.argv.slice(2);
const root = fileURLToPath(new URL('..', import.meta.url));
if (args[0] === '--render') {
  // RELIABILITY.md again from reliability/*.json, without a run.
  await writeReports(null, root);
  process.exit(0);
}
let soakMs: number | undefined;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--soak') {
    const v = args[++i];
    if (!v) fail('--soak needs a duration, e.g. --soak 30m');
    soakMs = parseDuration(v);
    if (!soakMs) fail(`--soak "${v}" is not a duration; use e.g. 30m, 2h or 90s`);
  } else {
    fail(
      `unknown argument "${args[i]}"; use --soak <duration>, --render, CHAOS_FAULTS, CHAOS_SEED, CHAOS_LANES, CHAOS_NET`,
    );
  }
}
const seed = intFrom('CHAOS_SEED', Math.floor(Math.random() * 2 ** 31), 0);
const faults = intFrom('CHAOS_FAULTS', 500, 1);
const lanes = intFrom('CHAOS_LANES', 10, 1);
// CHAOS_NET="tmkb-/10.215.0": the hosts' name prefix and /24, for a second run beside another.
const netSpec = process.env.CHAOS_NET;
const [netPrefix, netSubnet] = (netSpec ?? '').split('/');
if (netSpec && !(netPrefix && netSubnet)) fail(`CHAOS_NET="${netSpec}" must be like tmkb-/10.215.0`);
const net = netSpec ? { prefix: netPrefix!, subnet: netSubnet! } : undefined;
// The plan depends on the seed, the fault count and the lanes: the command names all three.
const command = [
  `CHAOS_SEED=${seed}`,
  soakMs ? '' : `CHAOS_FAULTS=${faults}`,
  `CHAOS_LANES=${lanes}`,
  'npm run chaos',
  soakMs ? `-- --soak ${args[args.indexOf('--soak') + 1]}` : '',
]
  .filter(Boolean)
  .join(' ');
const t0 = Date.now();
const log = (line: string) =>
  console.log(`[chaos ${((Date.now() - t0) / 1000).toFixed(0).padStart(5)} s] ${line}`);
log(`seed ${seed}: ${soakMs ? `soak for ${soakMs / 60_000} min` : `${faults} faults`}, ${lanes} lanes`);
const results = await runChaos({ faults, seed, lanes, soakMs, partitionSeconds: [10, 60], net, log });
await writeReports({ command, ...(soakMs ? { soak_ms: soakMs } : {}), ...results }, root);
log(
  `${results.faults_injected} faults: duplicate effects ${results.duplicate_effects}, duplicate windows ${results.duplicate_windows}, lost windows ${results.lost_windows}, lost effects ${results.lost_effects}, unalerted unknowns ${results.unalerted_unknowns}, other ${results.other_violations}; wrote RELIABILITY.md and reliability/${soakMs ? 'soak' : 'results'}.json`,
);
process.exit(clean(results) ? 0 : 1);
