// The fault suite's driver. Lanes run rounds side by side; each round gives its lane's job new
// windows (or a rerun) through a workload (a tick, a backfill, a rerun, a storm of duplicate
// starts), injects one fault of its planned kind while that work is in flight, waits until the
// work is settled (the recovery time), and runs the independent checker over every window of
// the job so far. New violations are charged to the round's fault kind.
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import { sql } from 'kysely';
import { CRASH_POINT, type CrashPoint } from '../activities/crash-points.js';
import { policyOf } from '../activities/deps.js';
import { desiredSchedule } from '../workers/schedule-sync.js';
import { checkInvariants, type CheckResult } from '../test/helpers/invariants.js';
import { LIVE_JOB, chaosCatalog, laneJob, laneStart } from './catalog.js';
import { FAULT_KINDS, between, pick, planKinds, rng, type FaultKind } from './faults.js';
import { emptyFigures, percentile, type ChaosResults, type KindFigures } from './report.js';
import { TASK_QUEUE, startStack, type Stack } from './stack.js';
import { Mutex, persist, until } from './waits.js';

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

const HOUR = 3_600_000;
/** A round's work not settled after this long is a stall (said, counted); after SETTLE_MS, lost. */
const STALL_MS = 300_000;
const SETTLE_MS = 900_000;
/** How long an armed crash point (or the state a fault waits for) may take to be reached on a busy machine. */
const CLAIM_MS = 180_000;
/** Faults the driver times to meet the round's work (a crash point is met by the work itself). */
const AIMED_AT_WORK: ReadonlySet<FaultKind> = new Set([
  'temporal-restart',
  'pg-terminate',
  'pg-restart',
  'partition',
]);
const STEADY_HOST = 'h1';
const MINUTE = 60_000;
const iso = (d: Date): string => d.toISOString().replace('.000Z', 'Z');
interface Win {
  start: Date;
  end: Date;
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
  private readonly figures = new Map<FaultKind, KindFigures>(FAULT_KINDS.map((k) => [k, emptyFigures()]));
  private readonly seen = new Set<string>();
  private readonly violations: { kind: FaultKind | 'final' | 'warm-up'; text: string }[] = [];
  private readonly serverFaults = new Mutex();
  private readonly partitions = new Mutex();
  private injected = 0;
  private stalls = 0;
  private readonly harnessErrors: string[] = [];
  private rounds = 0;
  private ids = 0;
  private readonly lanes: {
    job: string;
    lane: number;
    windows: number;
    generations: Map<number, number>;
    random: () => number;
  }[];
  private readonly samples: { at: number; host: string; pid: number; rssKb: number; fds: number }[] = [];

  constructor(
    private readonly stack: Stack,
    private readonly opts: ChaosOptions,
    private readonly liveStart: Date,
    private readonly started: number,
  ) {
    this.catalog = chaosCatalog({ lanes: opts.lanes, liveStart });
    this.lanes = Array.from({ length: opts.lanes }, (_, lane) => ({
      job: laneJob(lane),
      lane,
      windows: 0,
      generations: new Map(),
      // Each lane its own generator: its choices do not depend on how the lanes interleave.
      random: rng((opts.seed + (lane + 1) * 7919) >>> 0),
    }));
  }

  private get client(): Client {
    return this.stack.client;
  }

  private done(): boolean {
    return this.opts.soakMs
      ? Date.now() - this.started >= this.opts.soakMs
      : this.injected >= this.opts.faults;
  }

  async run(): Promise<ChaosResults> {
    const { log } = this.opts;
    // The live job: a real Schedule, every minute, for the whole run.
    const live = this.catalog.get(LIVE_JOB);
    await this.client.schedule.create(desiredSchedule(live, TASK_QUEUE));
    const feeding = this.feedLiveOrders();
    const sampling = this.sample();
    // Each lane starts with two windows processed without a fault, so a rerun has one to take.
    await Promise.all(this.lanes.map((l) => this.round(l, null)));
    // Lane i takes the plan's kinds i, i + lanes, i + 2 lanes, ...: a seed gives each lane the same
    // sequence of kinds and choices; only how far each lane gets depends on the machine.
    const plan = planKinds(this.opts.soakMs ? 1000 : this.opts.faults, rng(this.opts.seed ^ 0x5eed));
    await Promise.all(
      this.lanes.map(async (lane) => {
        // Every lane runs its share of the plan's head (each kind once) whatever the count.
        for (let n = lane.lane; n < FAULT_KINDS.length || !this.done(); n += this.lanes.length) {
          const kind = plan[n % plan.length]!;
          try {
            await this.round(lane, kind);
          } catch (err) {
            // The harness itself failed (not the system under test): said, counted, published.
            this.harnessErrors.push(`${kind} on ${lane.job}: ${(err as Error).stack ?? String(err)}`);
            log(`HARNESS ERROR (${kind}) on ${lane.job}: ${(err as Error).message}`);
          }
        }
      }),
    );
    log(`faults injected: ${this.injected} in ${this.rounds} rounds; settling the live job`);
    this.stopFeeding = true;
    await feeding;
    await this.settleLive();
    this.stopSampling = true;
    await sampling;
    // The final word: every lane and the live job, checked once more after everything settled.
    for (const l of this.lanes) await this.check(l.job, this.laneWindows(l), 'final');
    return this.results();
  }

  // ---- windows and workloads

  private laneWindows(l: { lane: number; windows: number }): Win[] {
    const t0 = laneStart(l.lane).getTime();
    return Array.from({ length: l.windows }, (_, i) => ({
      start: new Date(t0 + i * HOUR),
      end: new Date(t0 + (i + 1) * HOUR),
    }));
  }

  private async addOrders(job: string, windows: readonly Win[]): Promise<void> {
    const rows = windows.flatMap((w) =>
      Array.from({ length: 5 }, (_, i) => ({
        order_key: `${job}-${iso(w.start)}-${i}`,
        placed_at: new Date(w.start.getTime() + i * 11 * MINUTE),
        // Every fifth order has no amount: quarantined, never summed.
        amount: i === 4 ? null : Math.round(1000 + i * 337 + w.start.getTime() / HOUR) / 100,
      })),
    );
    await persist('insert orders', () =>
      this.stack.db
        .insertInto('orders')
        .values(rows)
        .onConflict((c) => c.column('order_key').doNothing())
        .execute(),
    );
  }

  private start(workflow: string, workflowId: string, args: unknown[]): Promise<unknown> {
    return persist(`start ${workflowId}`, async () => {
      try {
        return await this.client.workflow.start(workflow, { taskQueue: TASK_QUEUE, workflowId, args });
      } catch (err) {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return null; // the engine refused a copy
        throw err;
      }
    });
  }

  private tick(job: string, now: Date) {
    return this.start('tick', `${job}/tick-${++this.ids}`, [{ job, now: iso(now) }]);
  }

  private backfill(job: string, from: Date, to: Date, pageSize: number) {
    return this.start('backfill', `${job}/backfill-${++this.ids}`, [
      { job, from: iso(from), to: iso(to), concurrency: 1, pageSize },
    ]);
  }

  /** A window run; `copy` gives it another workflow id, so the engine cannot refuse it: the ledger must. */
  private runWindow(job: string, w: Win, generation: number, trigger: 'manual' | 'rerun', copy?: number) {
    const key = `${job}/${iso(w.start)}${generation ? `#${generation}` : ''}`;
    const policy = policyOf(this.catalog.get(job));
    return this.start('window', copy ? `${key}~copy-${copy}` : key, [
      { job, start: iso(w.start), end: iso(w.end), generation, key, trigger, policy },
    ]);
  }

  private async statusOf(key: string): Promise<string | undefined> {
    const row = await this.stack.db
      .selectFrom('job_windows')
      .select('status')
      .where('window_key', '=', key)
      .executeTakeFirst();
    return row?.status;
  }

  /** Settled: every key done, and no effect of the job pending or begun. */
  private async settled(job: string, keys: readonly string[], ms: number): Promise<boolean> {
    const ok = await until(`${job} settled`, ms, async () => {
      const rows = await this.stack.db
        .selectFrom('job_windows')
        .select(['window_key', 'status'])
        .where('window_key', 'in', keys)
        .execute();
      if (rows.length < keys.length || rows.some((r) => r.status !== 'done')) return undefined;
      const open = await this.stack.db
        .selectFrom('effects')
        .select('effect_key')
        .where('job', '=', job)
        .where('status', 'in', ['pending', 'begun'])
        .execute();
      return open.length === 0 ? true : undefined;
    });
    if (!ok) return false;
    // And every run of them ended: an effect in doubt is alerted by its window's run after the
    // ledger settles, so the check waits for the runs, not for a proxy.
    for (const key of keys) await this.runEnded(key, ms);
    return true;
  }

  /** The outcome of the latest run of this workflow id once it ended ('failed' if it failed). */
  private async outcomeOf(workflowId: string, ms: number): Promise<string> {
    return await persist(
      `the run of ${workflowId} to end`,
      async () => {
        try {
          const r = (await this.client.workflow.getHandle(workflowId).result()) as { outcome?: string };
          return r?.outcome ?? 'without an outcome';
        } catch (err) {
          if ((err as Error).name === 'WorkflowFailedError') {
            const cause = (err as Error & { cause?: Error }).cause;
            return `failed: ${cause?.message ?? (err as Error).message}`;
          }
          throw err;
        }
      },
      ms,
    );
  }

  /** Waits until the run with this workflow id ended, whether it succeeded or failed. */
  private async runEnded(workflowId: string, ms: number): Promise<void> {
    await persist(
      `the run of ${workflowId} to end`,
      async () => {
        try {
          await this.client.workflow.getHandle(workflowId).result();
        } catch (err) {
          const name = (err as Error).name;
          if (name !== 'WorkflowFailedError' && name !== 'WorkflowContinuedAsNewError') throw err;
        }
      },
      ms,
    );
  }

  // ---- faults

  private async arm(point: CrashPoint, job: string | undefined): Promise<string> {
    const id = `${++this.ids}.json`;
    await writeFile(join(this.stack.dir, 'armed', id), JSON.stringify({ point, ...(job ? { job } : {}) }));
    return id;
  }

  /** Waits for a worker to claim (and die at) the arming; disarms it when none did in time. */
  private async claimed(id: string, ms: number): Promise<boolean> {
    const hit = await until(`claim ${id}`, ms, async () =>
      (await readdir(join(this.stack.dir, 'claimed'))).some((f) => f.startsWith(`${id}.`)) ? true : undefined,
    );
    if (hit) return true;
    try {
      await rm(join(this.stack.dir, 'armed', id));
      return false;
    } catch {
      return true; // claimed as we gave up
    }
  }

  /** True when every window of `keys` is done and no effect of the job is open: nothing in flight. */
  private async idle(job: string, keys: readonly string[]): Promise<boolean> {
    try {
      const open = await this.stack.db
        .selectFrom('job_windows')
        .select('window_key')
        .where('window_key', 'in', keys)
        .where('status', '=', 'done')
        .execute();
      if (open.length < keys.length) return false;
      const effects = await this.stack.db
        .selectFrom('effects')
        .select('effect_key')
        .where('job', '=', job)
        .where('status', 'in', ['pending', 'begun'])
        .execute();
      return effects.length === 0;
    } catch {
      return false; // the server is down (the fault itself): the work cannot have finished now
    }
  }

  private async backendsInTransaction(): Promise<string[]> {
    const rows = await sql<{ application_name: string }>`
      select application_name from pg_stat_activity
       where application_name like 'tidemark-chaos-%' and xact_start is not null`.execute(this.stack.db);
    return rows.rows.map((r) => r.application_name.replace('tidemark-chaos-', ''));
  }

  /** The crash point armed before the round's work starts, if its kind arms one then. */
  private async armFor(point: CrashPoint | undefined, job: string): Promise<string | undefined> {
    return point === CRASH_POINT.inAlertDelivery
      ? await this.arm(CRASH_POINT.afterBegin, job) // the e-mail in doubt whose incident alerts
      : point && point !== CRASH_POINT.backfillPage
        ? await this.arm(point, job)
        : undefined;
  }

  /** One host's clock moved 1 to 5 s either way (its worker restarts with it). */
  private async skewClock(r: () => number, note: () => void): Promise<void> {
    const host = pick(
      r,
      this.stack.hosts.names.filter((h) => !this.opts.soakMs || h !== STEADY_HOST),
    );
    const offset = (r() < 0.5 ? -1 : 1) * between(r, 1, 5) * 1000;
    await this.stack.workers.setClockOffset(host, offset);
    this.opts.log(`clock-skew: ${host} now ${offset > 0 ? '+' : ''}${offset / 1000} s`);
    note();
  }

  /**
   * The fault of `kind` aimed at the round's work, started as the work starts: a crash point
   * armed (`armed`) waited for until a worker dies at it, a backfill's second page, the Temporal
   * server killed, PostgreSQL backends terminated or the server restarted, a host cut off. Each
   * injection calls `note`. Resolved at once for a kind injected before the work (or none).
   */
  private strike(
    kind: FaultKind | null,
    armed: string | undefined,
    round: { job: string; keys: readonly string[]; random: () => number },
    note: () => void,
  ): Promise<void> {
    const { job, keys, random: r } = round;
    const point = crashPointOf(kind);
    if (point === CRASH_POINT.backfillPage) {
      // The second page: planned by the run the backfill continued as new into.
      return (async () => {
        await until('first page', CLAIM_MS, async () =>
          (await this.statusOf(keys[0]!)) === 'done' ? true : undefined,
        );
        if (await this.claimed(await this.arm(point, job), CLAIM_MS)) note();
      })();
    } else if (point === CRASH_POINT.inAlertDelivery) {
      return (async () => {
        if (!(await this.claimed(armed!, CLAIM_MS))) return;
        note(); // crash:afterBegin, counted under this round's kind
        if (await this.claimed(await this.arm(point, undefined), CLAIM_MS)) note();
      })();
    } else if (armed) {
      return this.claimed(armed, CLAIM_MS).then((hit) => {
        if (hit) note();
      });
    } else if (kind === 'temporal-restart') {
      return this.serverFaults.run(async () => {
        // In the middle of the catch-up: once its first window is done.
        await until('first window', CLAIM_MS, async () =>
          (await this.statusOf(keys[0]!)) === 'done' ? true : undefined,
        );
        await this.stack.temporal.kill();
        note();
        await sleep(between(r, 500, 3000));
        await this.stack.temporal.start();
      });
    } else if (kind === 'pg-terminate' || kind === 'pg-restart') {
      const mode = r() < 0.5 ? 'immediate' : 'fast';
      return this.serverFaults.run(async () => {
        const busy = await until('a worker in a transaction', 30_000, async () =>
          (await this.backendsInTransaction()).length > 0 ? true : undefined,
        );
        if (!busy) return;
        if (kind === 'pg-restart') {
          note(); // recovery counts from the moment the server goes down, like a Temporal kill's
          await this.stack.pg.restart(mode);
        } else if (
          (await this.stack.pg.terminateBackends({
            applicationNamePrefix: 'tidemark-chaos-',
            inTransaction: true,
          })) > 0
        ) {
          note();
        }
      });
    } else if (kind === 'partition') {
      const seconds = between(r, this.opts.partitionSeconds[0], this.opts.partitionSeconds[1]);
      return this.partitions.run(async () => {
        // A host that holds a window (its transaction open) is cut off.
        const host = await until(
          'a host holding a window',
          30_000,
          async () => (await this.backendsInTransaction())[0],
        );
        if (!host) return;
        await this.cut(host, true);
        note();
        this.opts.log(`partition: ${host} cut off for ${seconds} s`);
        await sleep(seconds * 1000);
        await this.cut(host, false);
      });
    }
    return Promise.resolve();
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
        if (kind && AIMED_AT_WORK.has(kind)) idle.push(this.idle(job, keys));
      }
    };
    const point = crashPointOf(kind);
    const count = kind === 'temporal-restart' ? 4 : kind === 'pg-terminate' || kind === 'pg-restart' ? 3 : 2;
    let work: Promise<unknown>;
    let armed: string | undefined;

    if (point === CRASH_POINT.inGenerationSwap) {
      // A rerun of a done window: its next generation replaces the previous contribution.
      const index = between(r, 0, lane.windows - 1);
      const w = this.laneWindows(lane)[index]!;
      const generation = (lane.generations.get(index) ?? 0) + 1;
      lane.generations.set(index, generation);
      armed = await this.armFor(point, job);
      keys = [`${job}/${iso(w.start)}#${generation}`];
      work = this.runWindow(job, w, generation, 'rerun');
    } else {
      const from = lane.windows;
      lane.windows += count;
      const windows = this.laneWindows(lane).slice(from);
      await this.addOrders(job, windows);
      keys = windows.map((w) => `${job}/${iso(w.start)}`);
      const first = windows[0]!.start;
      const last = windows.at(-1)!.end;
      const byBackfill = point === CRASH_POINT.backfillPage || (kind === 'temporal-restart' && r() < 0.5);
      if (kind === 'duplicates') {
        // The same windows from a tick, a backfill and two manual starts at once (the engine refuses
        // the second of those, as it does a tick's or backfill's copy), and two more runs of each
        // under other workflow ids, which only the ledger can stop.
        note();
        const copies = windows
          .map((w) => `${job}/${iso(w.start)}`)
          .flatMap((k) => [`${k}~copy-1`, `${k}~copy-2`]);
        work = Promise.all([
          this.tick(job, last),
          this.backfill(job, first, last, 1),
          ...windows.flatMap((w) => [
            this.runWindow(job, w, 0, 'manual'),
            this.runWindow(job, w, 0, 'manual'),
            this.runWindow(job, w, 0, 'manual', 1),
            this.runWindow(job, w, 0, 'manual', 2),
          ]),
        ]).then(async () => {
          for (const id of copies) await this.runEnded(id, SETTLE_MS);
        });
      } else {
        if (kind === 'clock-skew') await this.skewClock(r, note);
        armed = await this.armFor(point, job);
        // A backfill a window a page (it continues as new between pages); two for a restart's.
        work = byBackfill
          ? this.backfill(job, first, last, kind === 'temporal-restart' ? 2 : 1)
          : this.tick(job, last);
      }
    }
    const fault = this.strike(kind, armed, { job, keys, random: r }, note);
    await Promise.all([work, fault]);
    // Settled, however slowly: a busy machine makes recovery slow, not work lost. Only work that
    // has not settled after SETTLE_MS counts as lost; a round past STALL_MS is said and counted.
    const stall = setTimeout(() => {
      this.stalls++;
      this.opts.log(
        `STALL (${kind ?? 'no fault'}) ${job}: ${keys.join(', ')} not settled after ${STALL_MS / 1000} s`,
      );
    }, STALL_MS);
    const ok = await this.settled(job, keys, SETTLE_MS).finally(() => clearTimeout(stall));
    const recoveredAt = Date.now();
    const retried = kind === 'duplicates' ? await this.presentedAgain(job, keys) : [];
    this.rounds++;
    if (!kind) {
      await this.check(job, this.laneWindows(lane), 'warm-up');
      return;
    }
    for (const text of retried) this.violation(kind, text, 'other');
    await this.charge(kind, injectedAt, idle, recoveredAt);
    if (!ok)
      this.violation(
        kind,
        `round ${this.rounds} (${kind}) of ${job}: ${keys.join(', ')} not settled within 300 s`,
        'lost_windows',
      );
    await this.check(job, this.laneWindows(lane), kind);
    if (this.rounds % 25 === 0)
      this.opts.log(
        `round ${this.rounds}: ${this.injected} faults injected, ${this.violations.length} violations`,
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
      await this.runWindow(job, { start, end: new Date(start.getTime() + HOUR) }, 0, 'manual');
      // Its run ends (it found the window done) before the check looks for a second effect.
      const outcome = await this.outcomeOf(key, 60_000);
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

  private async cut(host: string, off: boolean): Promise<void> {
    if (this.stack.hosts.mode === 'netns') {
      await (off ? this.stack.hosts.partition(host) : this.stack.hosts.heal(host));
    } else {
      // Without namespaces a partition is stood in for by freezing the host's worker.
      this.stack.workers.signal(host, off ? 'SIGSTOP' : 'SIGCONT');
    }
  }

  // ---- checks and figures

  private violation(kind: FaultKind | 'final' | 'warm-up', text: string, figure: keyof KindFigures): void {
    // One defect, one count: by its subject (a window, a day's total, an effect, an incident), as
    // its text changes while later rounds add windows; charged to the round that first saw it.
    const subject = text.includes(': ') ? text.slice(0, text.indexOf(': ')) : text;
    if (this.seen.has(subject)) return;
    this.seen.add(subject);
    this.violations.push({ kind, text });
    this.opts.log(`VIOLATION (${kind}): ${text}`);
    this.totals.set(figure, (this.totals.get(figure) ?? 0) + 1);
    if (kind !== 'final' && kind !== 'warm-up') {
      const fig = this.figures.get(kind)!;
      (fig[figure] as number)++;
    }
  }

  /** A fault round's figures: its injections, those that met no work open, each one's recovery. */
  private async charge(
    kind: FaultKind,
    injectedAt: readonly number[],
    idle: readonly Promise<boolean>[],
    recoveredAt: number,
  ): Promise<void> {
    this.injected += injectedAt.length;
    const fig = this.figures.get(kind)!;
    fig.rounds++;
    fig.injected += injectedAt.length;
    fig.injected_idle += (await Promise.all(idle)).filter(Boolean).length;
    if (injectedAt.length) fig.recoveryMs.push(...injectedAt.map((t) => recoveredAt - t));
  }

  private async check(
    job: string,
    windows: readonly Win[],
    kind: FaultKind | 'final' | 'warm-up',
  ): Promise<void> {
    const result: CheckResult = await persist('check', () =>
      checkInvariants(
        this.stack.db,
        job,
        windows,
        { emails: this.stack.smtp.messages, chat: this.stack.chat.messages },
        // Every window of the chaos catalog sends its report (chaos/catalog.ts).
        { effectsPerWindow: ['report'] },
      ),
    );
    for (const text of result.duplicates)
      this.violation(
        kind,
        text,
        text.startsWith('alert about') || text.startsWith('effect alert:')
          ? 'duplicate_alerts'
          : text.startsWith('effect ')
            ? 'duplicate_effects'
            : 'duplicate_windows',
      );
    for (const text of result.lost)
      this.violation(
        kind,
        text,
        text.startsWith('effect ') || text.startsWith('alert about') ? 'lost_effects' : 'lost_windows',
      );
    for (const text of result.unalertedUnknowns) this.violation(kind, text, 'unalerted_unknowns');
    for (const text of result.other) this.violation(kind, text, 'other');
    if (kind !== 'final' && kind !== 'warm-up') {
      // Like the check, through another lane's server restart.
      const inDoubt = await persist('count the effects in doubt', () =>
        sql<{ n: number }>`
          select count(*)::int as n from effects
           where job = ${job} and status in ('unknown', 'failed') and effect_key not like 'alert:%'`.execute(
          this.stack.db,
        ),
      );
      const fig = this.figures.get(kind)!;
      const before = this.inDoubtSeen.get(job) ?? 0;
      fig.unknown_alerted += Math.max(0, inDoubt.rows[0]!.n - before);
      this.inDoubtSeen.set(job, inDoubt.rows[0]!.n);
    }
  }
  private readonly inDoubtSeen = new Map<string, number>();
  private readonly totals = new Map<keyof KindFigures, number>();

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
      await this.addOrders(LIVE_JOB, minutes).catch(() => undefined);
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
      await this.tick(LIVE_JOB, last);
      ok = await this.settled(LIVE_JOB, keys, 30_000);
    }
    if (!ok)
      this.violation(
        'final',
        `live job: its ${windows.length} windows not settled within 300 s`,
        'lost_windows',
      );
    await this.check(LIVE_JOB, windows, 'final');
    this.liveWindows = windows.length;
  }
  private liveWindows = 0;

  /** Each host's worker: resident memory and open file descriptors, every 10 s. */
  private async sample(): Promise<void> {
    const { readFile } = await import('node:fs/promises');
    while (!this.stopSampling) {
      for (const host of this.stack.hosts.names) {
        const pid = this.stack.workers.pidOf(host);
        if (!pid) continue;
        try {
          const status = await readFile(`/proc/${pid}/status`, 'utf8');
          const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
          const fds = (await readdir(`/proc/${pid}/fd`)).length;
          this.samples.push({ at: Date.now(), host, pid, rssKb, fds });
        } catch {
          // the process just died
        }
      }
      for (let i = 0; i < 50 && !this.stopSampling; i++) await sleep(200);
    }
  }

  private results(): ChaosResults {
    const kinds = Object.fromEntries(
      [...this.figures].map(([k, f]) => [
        k,
        {
          ...f,
          recoveryMs: undefined,
          recovery_p50_ms: percentile(f.recoveryMs, 50),
          recovery_p99_ms: percentile(f.recoveryMs, 99),
        },
      ]),
    ) as unknown as ChaosResults['kinds'];
    const sum = (key: keyof KindFigures) => this.totals.get(key) ?? 0;
    const waits = this.stack.workers.lives.reduce(
      (n, l) => n + (l.output.match(new RegExp(`WAITING job=${LIVE_JOB} `, 'g')) ?? []).length,
      0,
    );
    return {
      seed: this.opts.seed,
      started_at: new Date(this.started).toISOString(),
      duration_s: Math.round((Date.now() - this.started) / 1000),
      hosts: {
        mode: this.stack.hosts.mode,
        note: this.stack.hosts.note,
        count: this.stack.hosts.names.length,
      },
      clock_skew_mechanism: this.stack.clockMechanism,
      lanes: this.opts.lanes,
      rounds: this.rounds,
      windows_checked: this.lanes.reduce((n, l) => n + l.windows, 0) + this.liveWindows,
      live_windows: this.liveWindows,
      live_windows_waited_for_skew: waits,
      worker_lives: this.stack.workers.lives.length,
      faults_injected: this.injected,
      duplicate_effects: sum('duplicate_effects'),
      duplicate_windows: sum('duplicate_windows'),
      lost_windows: sum('lost_windows'),
      lost_effects: sum('lost_effects'),
      unalerted_unknowns: sum('unalerted_unknowns'),
      duplicate_alerts: sum('duplicate_alerts'),
      other_violations: sum('other'),
      stalled_rounds: this.stalls,
      harness_errors: this.harnessErrors,
      final_violations: this.violations.filter((v) => v.kind === 'final').map((v) => v.text),
      violations: this.violations.map((v) => `${v.kind}: ${v.text}`),
      kinds,
      resources: this.samples,
    };
  }
}

/** The crash point a kind names (crash:<point>), or undefined for the other kinds. */
function crashPointOf(kind: FaultKind | null): CrashPoint | undefined {
  return kind?.startsWith('crash:') ? (kind.slice('crash:'.length) as CrashPoint) : undefined;
}
