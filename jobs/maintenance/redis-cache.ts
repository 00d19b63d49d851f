// Cache cleanup: Redis keys matching a pattern that nobody has touched for longer than an age
// (OBJECT IDLETIME), found with SCAN so a large keyspace is never blocked.

export interface RedisCleanup {
  url: string;
  pattern: string;
  maxIdleSeconds: number;
}

export async function cleanRedis(task: RedisCleanup): Promise<{ scanned: number; removed: string[] }> {
  // Loaded here, not with the module: every worker of the demo catalog imports this job, few run it
  // (ioredis held ~5 MiB of a worker's resident memory).
  const { Redis } = await import('ioredis');
  const redis = new Redis(task.url, { lazyConnect: true, maxRetriesPerRequest: 2 });
  await redis.connect();
  try {
    let cursor = '0';
    let scanned = 0;
    const removed: string[] = [];
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', task.pattern, 'COUNT', 500);
      cursor = next;
      scanned += keys.length;
      for (const key of keys) {
        const idle = (await redis.object('IDLETIME', key)) as number | null;
        // Deleting twice is harmless: a key gone since the scan counts as not removed by us.
        if (idle !== null && idle >= task.maxIdleSeconds && (await redis.del(key)) === 1) removed.push(key);
      }
    } while (cursor !== '0');
    return { scanned, removed };
  } finally {
    redis.disconnect();
  }
}
