// The Node.js flags a worker runs with. V8 otherwise lets each isolate's heap (the main thread's
// and the SDK's workflow thread's) grow far past what is live before it collects: a worker holding
// ~100 MiB of live heap reached ~750 MiB resident after an 8,760-window backfill. Capped, it stays
// near its start. The image (Dockerfile) and `npm run worker` set them; bench/backfill-process.ts
// measures the worker with them. A catalog whose handlers hold more in memory raises the first:
// NODE_OPTIONS="--max-old-space-size=512 --max-semi-space-size=1".
export const WORKER_NODE_OPTIONS = '--max-old-space-size=256 --max-semi-space-size=1';

/**
 * Workflow runs a worker keeps cached. The SDK's default scales with V8's heap limit (2,395 at
 * Node's default, 32 at 256 MiB: fewer than a backfill's 32 windows and its parent, which would
 * evict and replay them). Completed runs leave the cache, so this bounds the open ones only.
 */
export const MAX_CACHED_WORKFLOWS = 500;
