// The fault kinds the suite injects, their share of a run, and a seeded plan: which kind the
// n-th round injects. A seed reproduces the plan and every random choice the rounds make (which
// host, how long, which mode); the interleaving of processes on a busy machine it cannot.
import { CRASH_POINT } from '../activities/crash-points.js';

export const FAULT_KINDS = Object.freeze([
  ...Object.values(CRASH_POINT).map((p) => `crash:${p}` as const),
  'temporal-restart',
  'pg-terminate',
  'pg-restart',
  'partition',
  'clock-skew',
  'duplicates',
] as const);
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Relative share of each kind in a run. Partitions last 10-60 s each, so they are fewer. */
const WEIGHT: Record<FaultKind, number> = {
  'crash:beforeClaim': 6,
  'crash:inHandler': 6,
  'crash:afterCommit': 6,
  'crash:afterBegin': 6,
  'crash:afterProvider': 6,
  'crash:inAlertDelivery': 4,
  'crash:backfillPage': 5,
  'crash:inGenerationSwap': 5,
  'crash:inBatch': 5,
  'temporal-restart': 5,
  'pg-terminate': 10,
  'pg-restart': 5,
  partition: 3,
  'clock-skew': 6,
  duplicates: 10,
};

/** A small seeded PRNG (mulberry32): the same seed gives the same sequence everywhere. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const pick = <T>(random: () => number, items: readonly T[]): T =>
  items[Math.floor(random() * items.length)]!;

export const between = (random: () => number, lo: number, hi: number): number =>
  lo + Math.floor(random() * (hi - lo + 1));

/**
 * The kinds of `rounds` rounds: every kind at least once (when there are enough rounds), the rest
 * by weight, shuffled.
 */
export function planKinds(rounds: number, random: () => number): FaultKind[] {
  const total = Object.values(WEIGHT).reduce((s, w) => s + w, 0);
  const plan: FaultKind[] = [];
  for (const kind of FAULT_KINDS) {
    const n = Math.max(1, Math.round((WEIGHT[kind] / total) * rounds));
    for (let i = 0; i < n; i++) plan.push(kind);
  }
  for (let i = plan.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [plan[i], plan[j]] = [plan[j]!, plan[i]!];
  }
  // Every kind first (in shuffled order), so a short run still has each of them.
  const firsts = FAULT_KINDS.map((k) => plan.indexOf(k)).sort((a, b) => a - b);
  const head = firsts.map((i) => plan[i]!);
  const rest = plan.filter((_, i) => !firsts.includes(i));
  return [...head, ...rest];
}
