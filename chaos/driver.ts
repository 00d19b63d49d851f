// The fault suite's driver. Lanes run rounds side by side; each round gives its lane's job new
// windows (or a rerun) through a workload (a tick, a backfill a window a page, a batched backfill,
// a rerun, a storm of duplicate starts), injects one fault of its planned kind while that work is in flight, waits until the
// work is settled (the recovery time), and runs the independent checker over every window of
// the job so far. New violations are charged to the round's fault kind. A drill round does the
// same with a window of the lane's backup job: its dump, and its restore drill into a scratch
// database, with the fault aimed at the drill.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import { CRASH_POINT } from '../activities/crash-points.js';
import { desiredSchedule } from '../workers/schedule-sync.js';
import {
  BACKUP_ROWS,
  BACKUP_TABLE,
  LIVE_JOB,
  backupDir,
  chaosCatalog,
  drillJob,
  drillStart,
  laneJob,
  pathOf,
  scratchDatabase,
} from './catalog.js';
import { FAULT_KINDS, between, planKinds, rng, type FaultKind } from './faults.js';
import { crashPointOf, Injectors } from './injectors.js';
import { Observer } from './observe.js';
import type { ChaosResults } from './report.js';
import { TASK_QUEUE, startStack, type Stack } from './stack.js';
import { Tally } from './tally.js';
import { persist } from './waits.js';
import { HOUR, iso, laneWindows, MINUTE, Workload, type Win } from './workload.js';

export interface ChaosOptions {
  /** Faults to inject (the run ends when it has); ignored by a soak run. */
  faults: number;
  seed: number;
  lanes: number;
  /** A soak run: continuous faults for this long, resources sampled. */
  soakMs?: number;
  /** How long a partition lasts, in seconds (inclusive range). */
  partitionSeconds: readonly [number, number];
  /** The hosts' names and /24 (chaos/hosts.ts); two runs at once need their own. */
  net?: { prefix: string; subnet: string };
  log: (line: string) => void;
}

/** A round's work not settled after this long is a stall (said, counted); after SETTLE_MS, lost. */
const STALL_MS = 300_000;
const SETTLE_MS = 900_000;
/** Faults the driver times to meet the round's work (a crash point is met by the work itself). */
const AIMED_AT_WORK: ReadonlySet<FaultKind> = new Set([
  'temporal-restart',
  'pg-terminate',
  'pg-restart',
  'partition',
]);
const STEADY_HOST = 'h1';
/**
 * The kinds a drill round can take: the crash points a window passes through, and the server
 * faults. A lane's first round of these kinds, and every third after it, is a drill round.
 */
const DRILL_KINDS: ReadonlySet<FaultKind> = new Set([
  'crash:beforeClaim',
  'crash:inHandler',
  'crash:afterCommit',
  'temporal-restart',
  'pg-terminate',
  'pg-restart',
]);
const DRILL_SHARE = 3;

/** Lane `lane`'s backup windows so far: one an hour from its backup job's start. */
export function drillWindows(l: { lane: number; drills: number }): Win[] {
  const t0 = drillStart(l.lane).getTime();
  return Array.from({ length: l.drills }, (_, i) => ({
    start: new Date(t0 + i * HOUR),
    end: new Date(t0 + (i + 1) * HOUR),
  }));
}

export async function runChaos(opts: ChaosOptions): Promise<ChaosResults> {
  const started = Date.now();
  const liveStart = new Date(Math.floor(started / MINUTE) * MINUTE);
  // A soak run keeps one host's worker alive throughout (no crash point, no clock restart) to
  // measure its memory and descriptors over the whole run; the other two take every fault.
  const stack = await startStack({
    lanes: opts.lanes,
    liveStart,
    hostCount: 3,
    ...(opts.net ? { net: opts.net } : {}),
    ...(opts.soakMs ? { steadyHost: STEADY_HOST } : {}),
    log: opts.log,
  });
  try {
    return await new Run(stack, opts, liveStart, started).run();
  } finally {
    await stack.teardown();
  }
}

class Run {
  private readonly catalog;
  private readonly tally: Tally;
  private readonly observer: Observer;
  private readonly injectors: Injectors;
  private readonly work: Workload;
  private ids = 0;
  private readonly lanes: {
    job: string;
    lane: number;
    windows: number;
    generations: Map<number, number>;
    /** The lane's backup windows so far, and its rounds of a drill kind so far. */
    drills: number;
    drillTurns: number;
    random: () => number;
  }[];

  constructor(
    private readonly stack: Stack,
    private readonly opts: ChaosOptions,
    private readonly liveStart: Date,
    private readonly started: number,
  ) {
    this.catalog = chaosCatalog({
      lanes: opts.lanes,
      liveStart,
      backups: { cluster: stack.pg.url(), runDir: stack.dir },
    });
    this.lanes = Array.from({ length: opts.lanes }, (_, lane) => ({
      job: laneJob(lane),
      lane,
      windows: 0,
      generations: new Map(),
      drills: 0,
      drillTurns: 0,
      // Each lane its own generator: its choices do not depend on how the lanes interleave.
      random: rng((opts.seed + (lane + 1) * 7919) >>> 0),
    }));
    const nextId = () => ++this.ids;
    this.tally = new Tally(stack, opts.log, (lane) => ({
      dir: backupDir(stack.dir),
      prefix: `${drillJob(lane)}/`,
      drillEvery: 1,
      scratchDatabase: scratchDatabase(lane),
      tableCounts: { [BACKUP_TABLE]: BACKUP_ROWS },
    }));
    this.observer = new Observer(stack);
    this.injectors = new Injectors(
      stack,
      this.observer,
      {
        partitionSeconds: opts.partitionSeconds,
        steadyHost: opts.soakMs ? STEADY_HOST : undefined,
        log: opts.log,
      },
      nextId,
    );
    this.work = new Workload(stack, this.catalog, nextId);
  }

  private get client(): Client {
    return this.stack.client;
  }

  private done(): boolean {
    return this.opts.soakMs
      ? Date.now() - this.started >= this.opts.soakMs
      : this.tally.injected >= this.opts.faults;
  }

  async run(): Promise<ChaosResults> {
    const { log } = this.opts;
    // The live job: a real Schedule, every minute, for the whole run.
    const live = this.catalog.get(LIVE_JOB);
    await this.client.schedule.create(desiredSchedule(live, TASK_QUEUE));
    const feeding = this.feedLiveOrders();
    const sampling = this.observer.sample(this.tally.samples, () => this.stopSampling);
    // Each lane starts with two windows processed without a fault, so a rerun has one to take,
    // and a backup window drilled without one.
    await Promise.all(
      this.lanes.map(async (l) => {
        await this.round(l, null);
        await this.drillRound(l, null);
      }),
    );
    // Lane i takes the plan's kinds i, i + lanes, i + 2 lanes, ...: a seed gives each lane the same
    // sequence of kinds and choices; only how far each lane gets depends on the machine.
    const plan = planKinds(this.opts.soakMs ? 1000 : this.opts.faults, rng(this.opts.seed ^ 0x5eed));
    await Promise.all(
      this.lanes.map(async (lane) => {
        // Every lane runs its share of the plan's head (each kind once) whatever the count.
        for (let n = lane.lane; n < FAULT_KINDS.length || !this.done(); n += this.lanes.length) {
          const kind = plan[n % plan.length]!;
          try {
            // A share of the kinds a drill can meet go to the lane's backup job instead.
            if (DRILL_KINDS.has(kind) && lane.drillTurns++ % DRILL_SHARE === 0)
              await this.drillRound(lane, kind);
            else await this.round(lane, kind);
          } catch (err) {
            // The harness itself failed (not the system under test): said, counted, published.
            this.tally.harnessErrors.push(`${kind} on ${lane.job}: ${(err as Error).stack ?? String(err)}`);
            log(`HARNESS ERROR (${kind}) on ${lane.job}: ${(err as Error).message}`);
          }
        }
      }),
    );
    log(`faults injected: ${this.tally.injected} in ${this.tally.rounds} rounds; settling the live job`);
    this.stopFeeding = true;
    await feeding;
    await this.settleLive();
    this.stopSampling = true;
    await sampling;
    // The final word: every lane and the live job, checked once more after everything settled.
    for (const l of this.lanes) {
      await this.tally.check(l.job, laneWindows(l), 'final');
      await this.tally.checkBackups(l.lane, drillWindows(l), 'final');
    }
    return this.tally.results({
      seed: this.opts.seed,
      started: this.started,
      lanes: this.opts.lanes,
      windowsChecked: this.lanes.reduce((n, l) => n + l.windows + l.drills, 0) + this.liveWindows,
      liveWindows: this.liveWindows,
    });
  }

  /** One round: new work for the lane, a fault of `kind` (none when null), recovery, the check. */
  private async round(lane: (typeof this.lanes)[number], kind: FaultKind | null): Promise<void> {
    const r = lane.random;
    const job = lane.job;
    const injectedAt: number[] = [];
    let keys: string[] = [];
    // A server fault or partition aims at the round's work but may land after it finished: each
    // one asks, as it happens, whether any of the round's windows or the job's effects was open.
    const idle: Promise<boolean>[] = [];
    const note = (n = 1) => {
      for (let i = 0; i < n; i++) {
        injectedAt.push(Date.now());
        if (kind && AIMED_AT_WORK.has(kind)) idle.push(this.observer.idle(job, keys));
      }
    };
    const point = crashPointOf(kind);
    const count =
      kind === 'temporal-restart' || point === CRASH_POINT.inBatch
        ? 4
        : kind === 'pg-terminate' || kind === 'pg-restart'
          ? 3
          : 2;
    let work: Promise<unknown>;
    let armed: string | undefined;
    let batched = false;

    if (point === CRASH_POINT.inGenerationSwap) {
      // A rerun of a done window: its next generation replaces the previous contribution.
      const index = between(r, 0, lane.windows - 1);
      const w = laneWindows(lane)[index]!;
      const generation = (lane.generations.get(index) ?? 0) + 1;
      lane.generations.set(index, generation);
      armed = await this.injectors.armFor(point, job);
      keys = [`${job}/${iso(w.start)}#${generation}`];
      work = this.work.runWindow(job, w, generation, 'rerun');
    } else {
      const from = lane.windows;
      lane.windows += count;
      const windows = laneWindows(lane).slice(from);
      await this.work.addOrders(job, windows);
      keys = windows.map((w) => `${job}/${iso(w.start)}`);
      const first = windows[0]!.start;
      const last = windows.at(-1)!.end;
      const byBackfill = point === CRASH_POINT.backfillPage || (kind === 'temporal-restart' && r() < 0.5);
      // A batched backfill (the round's windows in one batch activity): every crash in a batch, and
      // a share of the server faults, so that they meet a batch in flight too.
      batched =
        point === CRASH_POINT.inBatch ||
        ((kind === 'pg-terminate' || kind === 'pg-restart' || kind === 'temporal-restart') && r() < 0.3);
      if (kind === 'duplicates') {
        // The same windows from a tick, a backfill and two manual starts at once (the engine refuses
        // the second of those, as it does a tick's or backfill's copy), and two more runs of each
        // under other workflow ids, which only the ledger can stop.
        note();
        const copies = windows
          .map((w) => `${job}/${iso(w.start)}`)
          .flatMap((k) => [`${k}~copy-1`, `${k}~copy-2`]);
        work = Promise.all([
          this.work.tick(job, last),
          this.work.backfill(job, first, last, { pageSize: 1 }),
          ...windows.flatMap((w) => [
            this.work.runWindow(job, w, 0, 'manual'),
            this.work.runWindow(job, w, 0, 'manual'),
            this.work.runWindow(job, w, 0, 'manual', 1),
            this.work.runWindow(job, w, 0, 'manual', 2),
          ]),
        ]).then(async () => {
          for (const id of copies) await this.observer.runEnded(id, SETTLE_MS);
        });
      } else {
        if (kind === 'clock-skew') await this.injectors.skewClock(r, note);
        armed = await this.injectors.armFor(point, job);
        // A backfill a window a page (it continues as new between pages); two for a restart's.
        work = batched
          ? this.work.backfill(job, first, last, { batch: count })
          : byBackfill
            ? this.work.backfill(job, first, last, { pageSize: kind === 'temporal-restart' ? 2 : 1 })
            : this.work.tick(job, last);
      }
    }
    const fault = this.injectors.strike(kind, armed, { job, keys, random: r }, note);
    await Promise.all([work, fault]);
    const { ok, recoveredAt } = await this.settle(kind, job, keys);
    const retried = kind === 'duplicates' ? await this.presentedAgain(job, keys) : [];
    this.tally.rounds++;
    if (!kind) {
      await this.tally.check(job, laneWindows(lane), 'warm-up');
      return;
    }
    for (const text of retried) this.tally.violation(kind, text, 'other');
    await this.tally.charge(kind, injectedAt, idle, recoveredAt);
    this.tally.onPath(batched ? 'batch' : pathOf(lane.lane), lane.lane, injectedAt.length);
    this.unsettled(ok, kind, job, keys);
    await this.tally.check(job, laneWindows(lane), kind);
    this.progress();
  }

  /**
   * A drill round: the next window of the lane's backup job (a dump of the source, read back,
   * listed, restored into the lane's scratch database, counted and dropped, then published and
   * recorded) through a tick, with a fault of `kind` aimed at its drill (none when null): a crash
   * point armed for the backup's window, the worker holding the drill killed while it restores
   * (half the `crash:inHandler` rounds), or a server fault once the drill holds its scratch database.
   */
  private async drillRound(lane: (typeof this.lanes)[number], kind: FaultKind | null): Promise<void> {
    const r = lane.random;
    const job = drillJob(lane.lane);
    const scratch = scratchDatabase(lane.lane);
    const from = lane.drills;
    lane.drills += 1;
    const windows = drillWindows(lane).slice(from);
    const keys = windows.map((w) => `${job}/${iso(w.start)}`);
    const injectedAt: number[] = [];
    const idle: Promise<boolean>[] = [];
    const note = () => {
      injectedAt.push(Date.now());
      if (kind && AIMED_AT_WORK.has(kind)) idle.push(this.observer.idle(job, keys));
    };
    const point = crashPointOf(kind);
    const midDrill = point === CRASH_POINT.inHandler && r() < 0.5;
    const armed = midDrill ? undefined : await this.injectors.armFor(point, job);
    const work = this.work.tick(job, windows.at(-1)!.end);
    const fault = midDrill
      ? this.injectors.killInDrill(scratch, keys, note)
      : this.injectors.strike(kind, armed, { job, keys, random: r, drill: scratch }, note);
    await Promise.all([work, fault]);
    const { ok, recoveredAt } = await this.settle(kind, job, keys);
    this.tally.rounds++;
    if (!kind) {
      await this.tally.checkBackups(lane.lane, drillWindows(lane), 'warm-up');
      return;
    }
    await this.tally.charge(kind, injectedAt, idle, recoveredAt);
    this.tally.onPath('drill', lane.lane, injectedAt.length);
    this.unsettled(ok, kind, job, keys);
    await this.tally.checkBackups(lane.lane, drillWindows(lane), kind);
    this.progress();
  }

  /**
   * Waits until the round's work settled, however slowly: a busy machine makes recovery slow, not
   * work lost. Only work that has not settled after SETTLE_MS counts as lost; a round past
   * STALL_MS is said and counted.
   */
  private async settle(
    kind: FaultKind | null,
    job: string,
    keys: readonly string[],
  ): Promise<{ ok: boolean; recoveredAt: number }> {
    const stall = setTimeout(() => {
      this.tally.stalls++;
      this.opts.log(
        `STALL (${kind ?? 'no fault'}) ${job}: ${keys.join(', ')} not settled after ${STALL_MS / 1000} s`,
      );
    }, STALL_MS);
    const ok = await this.observer.settled(job, keys, SETTLE_MS).finally(() => clearTimeout(stall));
    return { ok, recoveredAt: Date.now() };
  }

  private unsettled(ok: boolean, kind: FaultKind, job: string, keys: readonly string[]): void {
    if (!ok)
      this.tally.violation(
        kind,
        `round ${this.tally.rounds} (${kind}) of ${job}: ${keys.join(', ')} not settled within 300 s`,
        'lost_windows',
      );
  }

  private progress(): void {
    if (this.tally.rounds % 25 === 0)
      this.opts.log(
        `round ${this.tally.rounds}: ${this.tally.injected} faults injected, ${this.tally.violations.length} violations`,
      );
  }

  /**
   * A retry of each done window: the ledger must answer "already done", with no second effect.
   * What it answered otherwise, one line a window.
   */
  private async presentedAgain(job: string, keys: readonly string[]): Promise<string[]> {
    const retried: string[] = [];
    for (const key of keys) {
      const start = new Date(key.slice(job.length + 1));
      await this.work.runWindow(job, { start, end: new Date(start.getTime() + HOUR) }, 0, 'manual');
      // Its run ends (it found the window done) before the check looks for a second effect.
      const outcome = await this.observer.outcomeOf(key, 60_000);
      // A window whose effect is in doubt (unknown, alerted) reports that again as its run's
      // failure ("committed, but 1 effect(s) are not done"): not processed again either.
      if (
        outcome !== 'already-done' &&
        !/^failed: .*committed, but \d+ effect\(s\) are not done/.test(outcome)
      )
        retried.push(`window ${key}: presented again once done, its run ended ${outcome}, not already-done`);
    }
    return retried;
  }

  // ---- the live job

  private stopFeeding = false;
  private stopSampling = false;

  /** Orders for the live job's coming minutes, a few minutes ahead of the clock. */
  private async feedLiveOrders(): Promise<void> {
    while (!this.stopFeeding) {
      const now = Date.now();
      const minutes = Array.from({ length: 5 }, (_, i) => {
        const start = new Date(Math.floor(now / MINUTE) * MINUTE + i * MINUTE);
        return { start, end: new Date(start.getTime() + MINUTE) };
      }).filter((w) => w.start >= this.liveStart);
      await this.work.addOrders(LIVE_JOB, minutes).catch(() => undefined);
      for (let i = 0; i < 50 && !this.stopFeeding; i++) await sleep(200);
    }
  }

  private async settleLive(): Promise<void> {
    const handle = this.client.schedule.getHandle(
      desiredSchedule(this.catalog.get(LIVE_JOB), TASK_QUEUE).scheduleId,
    );
    await persist('delete the live schedule', () => handle.delete());
    const last = new Date(Math.floor(Date.now() / MINUTE) * MINUTE);
    const windows: Win[] = [];
    for (let t = this.liveStart.getTime(); t + MINUTE <= last.getTime(); t += MINUTE)
      windows.push({ start: new Date(t), end: new Date(t + MINUTE) });
    // A tick starts at most the job's catch-up cap of windows: tick again until all settled.
    const keys = windows.map((w) => `${LIVE_JOB}/${iso(w.start)}`);
    const deadline = Date.now() + SETTLE_MS;
    let ok = false;
    while (!ok && Date.now() < deadline) {
      await this.work.tick(LIVE_JOB, last);
      ok = await this.observer.settled(LIVE_JOB, keys, 30_000);
    }
    if (!ok)
      this.tally.violation(
        'final',
        `live job: its ${windows.length} windows not settled within 300 s`,
        'lost_windows',
      );
    await this.tally.check(LIVE_JOB, windows, 'final');
    this.liveWindows = windows.length;
  }
  private liveWindows = 0;
}
