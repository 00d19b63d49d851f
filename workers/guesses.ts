// Failed guesses of a bearer token (the page's, a scrape token), per client address: past the
// limit in a minute, the address is refused (429) until its oldest failure is a minute old, the
// right token too (a throttle that let the right answer through would tell a guesser when it is
// right). Used by the page (web/server.ts) and a worker's probe server (workers/probes.ts).

export interface Guesses {
  /** Whether `address` has used up its failures of the last window. */
  over(address: string): boolean;
  /** Records a failed guess from `address`. */
  fail(address: string): void;
}

/** Addresses remembered at most (each a few failure times). */
const MAX_ADDRESSES = 10_000;

export function guessThrottle(max: number, windowMs: number, now: () => number = Date.now): Guesses {
  const failures = new Map<string, number[]>();
  const recent = (address: string) => {
    const since = now() - windowMs;
    const kept = (failures.get(address) ?? []).filter((t) => t > since);
    if (kept.length) failures.set(address, kept);
    else failures.delete(address);
    return kept;
  };
  return {
    over: (address) => recent(address).length >= max,
    fail: (address) => {
      const kept = recent(address);
      kept.push(now());
      // Bounded: past MAX_ADDRESSES the addresses that failed least recently are forgotten first
      // (a Map keeps insertion order; a failing address is moved to the end), at O(1) a guess.
      failures.delete(address);
      failures.set(address, kept);
      for (const oldest of failures.keys()) {
        if (failures.size <= MAX_ADDRESSES) break;
        failures.delete(oldest);
      }
    },
  };
}
