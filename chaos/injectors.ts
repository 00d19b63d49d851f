// The faults the suite injects: a crash point armed for a worker to die at, the Temporal server
// killed and started again, PostgreSQL's backends terminated or the server restarted, a host cut
// off from the network (or its worker frozen), a host's clock moved, a worker killed while it
// restores a backup's drill. Faults that stop a whole server run one at a time; so do partitions.
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CRASH_POINT, type CrashPoint } from '../activities/crash-points.js';
import { between, pick, type FaultKind } from './faults.js';
import type { Observer } from './observe.js';
import type { Stack } from './stack.js';
import { Mutex, until } from './waits.js';

/** How long an armed crash point (or the state a fault waits for) may take to be reached on a busy machine. */
const CLAIM_MS = 180_000;

/** The crash point a kind names (crash:<point>), or undefined for the other kinds. */
export function crashPointOf(kind: FaultKind | null): CrashPoint | undefined {
  return kind?.startsWith('crash:') ? (kind.slice('crash:'.length) as CrashPoint) : undefined;
}

export class Injectors {
  private readonly serverFaults = new Mutex();
  private readonly partitions = new Mutex();

  constructor(
    private readonly stack: Stack,
    private readonly observer: Observer,
    private readonly opts: {
      /** How long a partition lasts, in seconds (inclusive range). */
      partitionSeconds: readonly [number, number];
      /** A host no clock skew touches (a soak run's), if any. */
      steadyHost: string | undefined;
      log: (line: string) => void;
    },
    /** The run's counter, shared with the workflows the workload starts: each id once. */
    private readonly nextId: () => number,
  ) {}

  /** The crash point armed before the round's work starts, if its kind arms one then. */
  async armFor(point: CrashPoint | undefined, job: string): Promise<string | undefined> {
    return point === CRASH_POINT.inAlertDelivery
      ? await this.arm(CRASH_POINT.afterBegin, job) // the e-mail in doubt whose incident alerts
      : point && point !== CRASH_POINT.backfillPage
        ? await this.arm(point, job)
        : undefined;
  }

  /** One host's clock moved 1 to 5 s either way (its worker restarts with it). */
  async skewClock(r: () => number, note: () => void): Promise<void> {
    const host = pick(
      r,
      this.stack.hosts.names.filter((h) => h !== this.opts.steadyHost),
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
   * injection calls `note`. Resolved at once for a kind injected before the work (or none). In a
   * drill round (`drill` names its scratch database) a server fault waits for the drill to hold
   * its scratch database (or for the window to be done, when the drill was quicker).
   */
  strike(
    kind: FaultKind | null,
    armed: string | undefined,
    round: { job: string; keys: readonly string[]; random: () => number; drill?: string },
    note: () => void,
  ): Promise<void> {
    const { job, keys, random: r, drill } = round;
    const point = crashPointOf(kind);
    if (point === CRASH_POINT.backfillPage) {
      // The second page: planned by the run the backfill continued as new into.
      return (async () => {
        await until('first page', CLAIM_MS, async () =>
          (await this.observer.statusOf(keys[0]!)) === 'done' ? true : undefined,
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
        // In the middle of the catch-up: once its first window is done; a drill once it restores.
        if (drill) await this.drilling(drill, keys);
        else
          await until('first window', CLAIM_MS, async () =>
            (await this.observer.statusOf(keys[0]!)) === 'done' ? true : undefined,
          );
        await this.stack.temporal.kill();
        note();
        await sleep(between(r, 500, 3000));
        await this.stack.temporal.start();
      });
    } else if (kind === 'pg-terminate' || kind === 'pg-restart') {
      const mode = r() < 0.5 ? 'immediate' : 'fast';
      return this.serverFaults.run(async () => {
        if (drill) await this.drilling(drill, keys);
        const busy = await until('a worker in a transaction', 30_000, async () =>
          (await this.observer.backendsInTransaction()).length > 0 ? true : undefined,
        );
        if (!busy) return;
        if (kind === 'pg-restart') {
          note(); // recovery counts from the moment the server goes down, like a Temporal kill's
          await this.stack.pg.restart(mode);
        } else if (
          // The transaction seen may end before the terminate reaches it: aim again until one is hit.
          await until('a worker terminated in a transaction', 30_000, async () =>
            (await this.stack.pg.terminateBackends({
              applicationNamePrefix: 'tidemark-chaos-',
              inTransaction: true,
            })) > 0
              ? true
              : undefined,
          )
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
          async () => (await this.observer.backendsInTransaction())[0],
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

  /**
   * The worker restoring a drill into `scratch` killed (SIGKILL) while it holds the scratch
   * database: its restore is cut off, the database left behind for the next attempt to drop.
   * Nothing when the round's window was done first, or the steady host holds it.
   */
  async killInDrill(scratch: string, keys: readonly string[], note: () => void): Promise<void> {
    const host = await this.drilling(scratch, keys);
    if (!host || host === this.opts.steadyHost) return;
    this.stack.workers.signal(host, 'SIGKILL');
    note();
    this.opts.log(`crash: ${host} killed while its drill restores into ${scratch}`);
  }

  /** The host whose drill holds `scratch`, once one does; null when the round's window is done first. */
  private async drilling(scratch: string, keys: readonly string[]): Promise<string | null | undefined> {
    return await until('a drill restoring', CLAIM_MS, async () => {
      const host = await this.observer.drillHolder(scratch);
      if (host) return host;
      return (await this.observer.statusOf(keys[0]!)) === 'done' ? null : undefined;
    });
  }

  private async arm(point: CrashPoint, job: string | undefined): Promise<string> {
    const id = `${this.nextId()}.json`;
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

  private async cut(host: string, off: boolean): Promise<void> {
    if (this.stack.hosts.mode === 'netns') {
      await (off ? this.stack.hosts.partition(host) : this.stack.hosts.heal(host));
    } else {
      // Without namespaces a partition is stood in for by freezing the host's worker.
      this.stack.workers.signal(host, off ? 'SIGSTOP' : 'SIGCONT');
    }
  }
}
