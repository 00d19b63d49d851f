// tidemark beside graphile-worker and pg-boss on the same work (bench/peers.ts): throughput on
// the same orders, and windows applied twice or lost when the worker is SIGKILLed mid-run.
import type { BackfillRates } from './backfill.js';
import { figure, log, sizeFrom, type Figure } from './figures.js';
import { killTest, peerThroughput, PEERS, type KillSystem } from './peers.js';

const SLUG: Record<KillSystem, string> = {
  'graphile-worker': 'graphile_worker',
  'pg-boss': 'pg_boss',
  tidemark: 'tidemark',
};

export async function peerFigures(tidemark: BackfillRates): Promise<Figure[]> {
  const rates = await peerThroughput({ windows: tidemark.windows, log });
  const out: Figure[] = [];
  for (const peer of PEERS) {
    const base = figure(`peers.${SLUG[peer]}.windows_per_s`, rates[peer].windowsPerSecond, 'windows/s');
    out.push(
      base,
      figure(`peers.${SLUG[peer]}.throughput_ratio`, tidemark.batched, 'windows/s', base),
      figure(`peers.${SLUG[peer]}.per_window_ratio`, tidemark.perWindow, 'windows/s', base),
    );
  }
  return out;
}

/** Each system's worker SIGKILLed five times over 100 windows, restarted each time. */
export async function killFigures(): Promise<{ figures: Figure[]; notes: string[] }> {
  const windows = sizeFrom('BENCH_KILL_WINDOWS', 100, 30);
  const figures: Figure[] = [];
  const notes: string[] = [];
  for (const system of ['tidemark', ...PEERS] as const) {
    const r = await killTest(system, { windows, kills: windows >= 100 ? 5 : 2 });
    log(`kill test ${system}: ${r.kills} kills, ${r.double_applied} applied twice, ${r.lost} lost`);
    figures.push(
      figure(
        `${system === 'tidemark' ? 'tidemark' : `peers.${SLUG[system]}`}.double_applied`,
        r.double_applied,
        'windows',
      ),
      figure(`${system === 'tidemark' ? 'tidemark' : `peers.${SLUG[system]}`}.lost`, r.lost, 'windows'),
    );
    notes.push(
      `${system}: ${r.windows} windows, ${r.kills} kills (at ${r.progress_at_kills.join(', ')} windows applied), ` +
        `${r.once} applied once, ${r.double_applied} twice or more (${r.extra_applications} extra applications), ${r.lost} lost, ` +
        `${r.unfinished} unfinished at the bound; recovery: ${r.recovery}`,
    );
  }
  return { figures, notes };
}
