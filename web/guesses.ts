// Failed guesses of the page's bearer token, per client address: past the limit in a minute, the
// address is refused (429) until its oldest failure is a minute old, the right token too (a
// throttle that let the right answer through would tell a guesser when it is right).

export interface Guesses {
  /** Whether `address` has used up its failures of the last window. */
  over(address: string): boolean;
  /** Records a failed guess from `address`. */
  fail(address: string): void;
}

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
      failures.set(address, kept);
      // Addresses that stopped guessing are forgotten as they are looked at; many at once, here.
      if (failures.size > 10_000) for (const a of [...failures.keys()]) recent(a);
    },
  };
}

/**
 * fastify's trustProxy from TIDEMARK_WEB_TRUST_PROXY: a number of proxy hops, or the proxies'
 * addresses and networks (comma-separated); unset, X-Forwarded-For is not believed.
 */
export function trustProxyOf(setting: string | undefined): {
  trustProxy?: string | ((address: string, hop: number) => boolean);
} {
  if (!setting) return {};
  // Hops: the nearest n proxies are believed (proxy-addr asks hop by hop, nearest first).
  if (/^\d+$/.test(setting)) {
    const hops = Number(setting);
    return { trustProxy: (_address, hop) => hop < hops };
  }
  return { trustProxy: setting.replace(/\s+/g, '') };
}
