// Who a request comes from, behind the TLS proxy: fastify's trustProxy from
// TIDEMARK_WEB_TRUST_PROXY (the throttle of failed guesses, workers/guesses.ts, keys on it).

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
