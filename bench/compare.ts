// tidemark beside graphile-worker and pg-boss on the same work (bench/peers.ts): throughput on
// the same orders, and windows applied twice or lost when the worker is SIGKILLed mid-run; each
// peer with the careful handler its docs lead to (a done marker in the window's transaction) and
// with the naive one (the statement alone).
import type { BackfillRates } from './backfill.js';
import { figure, log, sizeFrom, type Figure } from './figures.js';
import { killTest, peerThroughput, PEERS, type KillSystem } from './peers.js';
import { HANDLERS, type Handler } from './peers/summary.js';

const SLUG: Record<KillSystem, string> = {
  'graphile-worker': 'graphile_worker',
  'pg-boss': 'pg_boss',
  tidemark: 'tidemark',
};

export async function peerFigures(tidemark: BackfillRates): Promise<Figure[]> {
  // Careful (a done marker in the window's transaction) is the baseline; naive beside it.
  const careful = await peerThroughput({ windows: tidemark.windows, handler: 'careful', log });
  const naive = await peerThroughput({ windows: tidemark.windows, handler: 'naive', log });
  const out: Figure[] = [];
  for (const peer of PEERS) {
    const base = figure(`peers.${SLUG[peer]}.windows_per_s`, careful[peer].windowsPerSecond, 'windows/s');
    out.push(
      base,
      figure(`peers.${SLUG[peer]}.throughput_ratio`, tidemark.batched, 'windows/s', base),
      figure(`peers.${SLUG[peer]}.per_window_ratio`, tidemark.perWindow, 'windows/s', base),
      figure(`peers.${SLUG[peer]}.naive_windows_per_s`, naive[peer].windowsPerSecond, 'windows/s', base),
    );
  }
  return out;
}

const slugOf = (system: KillSystem, handler: Handler) =>
  system === 'tidemark' ? 'tidemark' : `peers.${SLUG[system]}${handler === 'naive' ? '.naive' : ''}`;

const counted = (states: Record<string, number>) =>
  Object.entries(states)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');

/** Each system's worker SIGKILLed five times over 100 windows, restarted each time; the peers with both handlers. */
export async function killFigures(): Promise<{ figures: Figure[]; notes: string[] }> {
  const windows = sizeFrom('BENCH_KILL_WINDOWS', 100, 30);
  const figures: Figure[] = [];
  const notes: string[] = [];
  const runs = [
    ['tidemark', 'careful'],
    ...PEERS.flatMap((p) => HANDLERS.map((h) => [p, h] as const)),
  ] as const;
  for (const [system, handler] of runs) {
    const r = await killTest(system, { windows, kills: windows >= 100 ? 5 : 2, handler });
    const name = system === 'tidemark' ? system : `${system} (${handler} handler)`;
    log(`kill test ${name}: ${r.kills} kills, ${r.double_applied} applied twice, ${r.lost} lost`);
    figures.push(
      figure(`${slugOf(system, handler)}.double_applied`, r.double_applied, 'windows'),
      figure(`${slugOf(system, handler)}.lost`, r.lost, 'windows'),
    );
    notes.push(
      `${name}: ${r.windows} windows, ${r.kills} kills (at ${r.progress_at_kills.join(', ')} windows applied), ` +
        `${r.once} applied once, ${r.double_applied} twice or more (${r.extra_applications} extra applications), ${r.lost} lost` +
        (r.lost > 0 ? ` (their jobs: ${counted(r.lost_states)})` : '') +
        `, ${r.unfinished} unfinished at the bound; recovery: ${r.recovery}`,
    );
  }
  return { figures, notes };
}
