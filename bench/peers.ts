// Peers measured side by side (issue 10, item 4): graphile-worker and pg-boss run tidemark's hourly
// sales summary as one job per window, each in its own scratch database (tidemark's tables, the
// peer's own schema) with the same orders, with the careful handler (a done marker in the window's
// transaction) or the naive one (peers/summary.ts). Two figures:
//  - peerThroughput: windows/s from enqueueing every window's job to all of them done, totals
//    checked against the orders afterwards;
//  - killTest: a worker in a child process SIGKILLed several times in the middle of the windows,
//    restarted each time; then windows applied twice and windows lost, against the orders.
// Callers: bench/run.ts (raw figures; it computes the ratios) and test/integration/bench/peers.test.ts.
// killTest('tidemark') starts its own Temporal dev server: call it once the process has installed
// its SDK runtime (bench/run.ts's backfill does), or the SDK's default one is created. tidemark's
// throughput on the same orders: load throughputLayout(n) with loadPeerOrders into its database.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestDb, type TestDb } from '../test/helpers/db.js';
import { spawnReady } from '../test/helpers/spawn.js';
import {
  GRAPHILE_DEFAULTS,
  GRAPHILE_JOB,
  graphileEnqueuer,
  graphileJobStates,
  graphilePending,
  startGraphileWorker,
  unlockDeadGraphileWorkers,
  type GraphileSettings,
} from './peers/graphile-worker.js';
import { killSpread, type Harness } from './peers/kill.js';
import {
  applicationsPerWindow,
  windowsSoFar,
  checkTotals,
  loadPeerOrders,
  throughputLayout,
  windowsOf,
  type OrderLayout,
} from './peers/orders.js';
import {
  PGBOSS_DEFAULTS,
  PGBOSS_JOB,
  pgBossEnqueuer,
  pgBossJobStates,
  pgBossPending,
  startPgBossWorker,
  type PgBossSettings,
} from './peers/pg-boss.js';
import { peerPool, type Handler } from './peers/summary.js';
import { tidemarkHarness } from './peers/tidemark.js';
import type { PeerWorkerConfig } from './peers/worker.js';

export { checkTotals, loadPeerOrders, throughputLayout, type OrderLayout } from './peers/orders.js';

export const PEERS = ['graphile-worker', 'pg-boss'] as const;
export type Peer = (typeof PEERS)[number];
export type KillSystem = Peer | 'tidemark';

/** The first window: the same as bench/run.ts's. */
const T0 = new Date('2025-01-01T00:00:00Z');
const workerScript = fileURLToPath(new URL('./peers/worker.ts', import.meta.url));

export interface ThroughputOptions {
  /** Hourly windows, consecutive from 2025-01-01 (default 8,760). */
  windows?: number;
  /** Orders per window (default 3). */
  perWindow?: number;
  /** How each job is handled (default careful: a done marker in the window's transaction). */
  handler?: Handler;
  graphile?: Partial<GraphileSettings>;
  pgBoss?: Partial<PgBossSettings>;
  log?: (line: string) => void;
}

export interface PeerThroughput {
  handler: Handler;
  windows: number;
  seconds: number;
  windowsPerSecond: number;
  settings: GraphileSettings | PgBossSettings;
}

export async function peerThroughput(opts: ThroughputOptions = {}): Promise<Record<Peer, PeerThroughput>> {
  const layout = throughputLayout(opts.windows, opts.perWindow);
  const log = opts.log ?? (() => undefined);
  const graphile = { ...GRAPHILE_DEFAULTS, ...opts.graphile };
  const pgBoss = { ...PGBOSS_DEFAULTS, ...opts.pgBoss };
  const handler = opts.handler ?? 'careful';
  const result = {} as Record<Peer, PeerThroughput>;
  for (const peer of PEERS) {
    result[peer] = await throughputOf(peer, layout, peer === 'graphile-worker' ? graphile : pgBoss, handler);
    log(
      `${peer}, ${handler} handler: ${layout.windows} windows in ${result[peer].seconds.toFixed(1)} s, ${result[peer].windowsPerSecond.toFixed(1)}/s`,
    );
  }
  return result;
}

async function throughputOf(
  peer: Peer,
  layout: OrderLayout,
  settings: GraphileSettings | PgBossSettings,
  handler: Handler,
): Promise<PeerThroughput> {
  const t = await createTestDb();
  const probe = peerPool(t.url, 2);
  try {
    await loadPeerOrders(t.db, layout);
    const windows = windowsOf(layout);
    const graphile = peer === 'graphile-worker';
    // Both started (schemas installed, workers listening or polling) before the clock starts.
    const enqueuer = graphile
      ? await graphileEnqueuer(t.url)
      : await pgBossEnqueuer(t.url, settings as PgBossSettings);
    const worker = graphile
      ? await startGraphileWorker(t.url, settings as GraphileSettings, { handler })
      : await startPgBossWorker(t.url, settings as PgBossSettings, { handler });
    const pending = () => (graphile ? graphilePending(probe) : pgBossPending(probe));
    let seconds: number;
    try {
      const started = performance.now();
      await enqueuer.enqueue(windows);
      const deadline = Date.now() + Math.max(120_000, layout.windows * 100);
      while ((await pending()).pending > 0) {
        if (Date.now() > deadline)
          throw new Error(`${peer} did not finish ${layout.windows} windows in time`);
        await sleep(20);
      }
      seconds = (performance.now() - started) / 1000;
    } finally {
      await worker.stop();
      await enqueuer.release();
    }
    await checkTotals(t.db, graphile ? GRAPHILE_JOB : PGBOSS_JOB, layout);
    return {
      handler,
      windows: layout.windows,
      seconds,
      windowsPerSecond: layout.windows / seconds,
      settings,
    };
  } finally {
    await probe.end();
    await t.drop();
  }
}

export interface KillOptions {
  /** Hourly windows, a day apart so that each has its own daily row (default 100). */
  windows?: number;
  /** SIGKILLs, spread evenly over the windows (default 5). */
  kills?: number;
  /** How long each window's transaction stays open after its statement (default 100 ms). */
  holdMs?: number;
  /** The peers' handler (default careful); tidemark has one. */
  handler?: Handler;
  perWindow?: number;
  /** After the last restart, how long the system gets to finish (default 60 s). */
  boundMs?: number;
  /** A kill waits at most this long for its mark (a stalled system is killed anyway). */
  stallMs?: number;
  /** graphile-worker: free the dead worker's locks (force_unlock_workers) or leave them (4 hours). */
  graphileRecovery?: 'force-unlock' | 'none';
  graphile?: Partial<GraphileSettings>;
  pgBoss?: Partial<PgBossSettings>;
}

export interface KillResult {
  system: KillSystem;
  handler: Handler;
  windows: number;
  kills: number;
  /** Windows applied when each kill was sent (kills stop once the system has finished). */
  progress_at_kills: number[];
  once: number;
  double_applied: number;
  lost: number;
  /** What the system holds for the lost windows' work ("failed after 5 attempts": 11). */
  lost_states: Record<string, number>;
  /** Applications beyond one, over all windows (a window applied three times counts 2). */
  extra_applications: number;
  /** Work the system still had pending at the bound (locked_at_end of it held by a dead worker). */
  unfinished: number;
  locked_at_end: number;
  recovery: string;
  finish_ms: number;
}

export async function killTest(system: KillSystem, opts: KillOptions = {}): Promise<KillResult> {
  const layout: OrderLayout = {
    first: T0,
    windows: opts.windows ?? 100,
    perWindow: opts.perWindow ?? 3,
    strideHours: 24,
  };
  const holdMs = opts.holdMs ?? 100;
  const t = await createTestDb();
  let harness: Harness | undefined;
  try {
    await loadPeerOrders(t.db, layout);
    const windows = windowsOf(layout);
    harness =
      system === 'tidemark'
        ? await tidemarkHarness(t.url, windows, holdMs)
        : await peerHarness(system, t, windows, holdMs, opts);
    const run = await killSpread(harness, {
      windows: layout.windows,
      kills: opts.kills ?? 5,
      stallMs: opts.stallMs ?? 15_000,
      boundMs: opts.boundMs ?? 60_000,
      progress: () => windowsSoFar(t.db, harness!.job),
    });
    const times = await applicationsPerWindow(t.db, harness.job, layout);
    const lostStarts = windows.filter((_, i) => times[i] === 0).map((w) => w.start);
    return {
      system,
      handler: opts.handler ?? 'careful',
      windows: layout.windows,
      kills: run.kills,
      progress_at_kills: run.progressAtKills,
      once: times.filter((n) => n === 1).length,
      double_applied: times.filter((n) => n > 1).length,
      lost: lostStarts.length,
      lost_states: lostStarts.length ? await harness.lostStates(lostStarts) : {},
      extra_applications: times.reduce((sum, n) => sum + Math.max(0, n - 1), 0),
      unfinished: run.unfinished,
      locked_at_end: run.lockedAtEnd,
      recovery: harness.recovery,
      finish_ms: run.finishMs,
    };
  } finally {
    await harness?.close();
    await t.drop();
  }
}

async function peerHarness(
  peer: Peer,
  t: TestDb,
  windows: ReturnType<typeof windowsOf>,
  holdMs: number,
  opts: KillOptions,
): Promise<Harness> {
  const graphile = peer === 'graphile-worker';
  // A dead pg-boss worker's jobs wait for their expiration: 5 s, checked every second.
  const config: PeerWorkerConfig = {
    system: peer,
    url: t.url,
    run: { handler: opts.handler ?? 'careful', holdMs },
    graphile: { ...GRAPHILE_DEFAULTS, ...opts.graphile },
    pgBoss: { ...PGBOSS_DEFAULTS, expireInSeconds: 5, maintenanceIntervalSeconds: 1, ...opts.pgBoss },
  };
  const enqueuer = graphile ? await graphileEnqueuer(t.url) : await pgBossEnqueuer(t.url, config.pgBoss);
  try {
    await enqueuer.enqueue(windows);
  } finally {
    await enqueuer.release();
  }
  const probe = peerPool(t.url, 2);
  const recoveryMode = opts.graphileRecovery ?? 'force-unlock';
  let n = 0;
  return {
    job: graphile ? GRAPHILE_JOB : PGBOSS_JOB,
    recovery: graphile
      ? recoveryMode === 'force-unlock'
        ? 'force_unlock_workers(dead worker) after each kill; otherwise its locks hold for 4 hours'
        : "none: the dead worker's locks hold for 4 hours (graphile-worker 0.18.0's default)"
      : `expiration: expireInSeconds ${config.pgBoss.expireInSeconds}, maintenance every ${config.pgBoss.maintenanceIntervalSeconds} s, retryLimit ${config.pgBoss.retryLimit}`,
    spawn: () =>
      spawnReady(
        workerScript,
        { PEER_WORKER: JSON.stringify(config) },
        `${peer} worker ${++n} (${randomBytes(2).toString('hex')})`,
      ),
    pending: () => (graphile ? graphilePending(probe) : pgBossPending(probe)),
    lostStates: (starts) => (graphile ? graphileJobStates(probe, starts) : pgBossJobStates(probe, starts)),
    async afterKill() {
      if (graphile && recoveryMode === 'force-unlock') await unlockDeadGraphileWorkers(probe);
    },
    close: () => probe.end(),
  };
}
