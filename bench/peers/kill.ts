// The kill test's loop, the same for every system: a worker in a child process works through the
// windows; each time the windows applied pass the next of `kills` evenly spread marks, the worker
// is SIGKILLed (right after a commit was seen: jobs between their commit and their completion
// mark are then likely) and a new one started. Then the system gets `boundMs` to finish.
import { setTimeout as sleep } from 'node:timers/promises';
import type { ReadyProcess } from '../../test/helpers/spawn.js';

export interface Harness {
  /** The daily_sales job name the system's worker writes under. */
  job: string;
  /** What the system does about a dead worker's work (reported with the figures). */
  recovery: string;
  spawn(): Promise<ReadyProcess>;
  /** Work the system still considers unfinished, and how much of it a (dead) worker holds. */
  pending(): Promise<{ pending: number; locked: number }>;
  afterKill(): Promise<void>;
  /** What the system holds for the work of windows never applied, counted by state. */
  lostStates(starts: Date[]): Promise<Record<string, number>>;
  close(): Promise<void>;
}

export interface KillRun {
  kills: number;
  progressAtKills: number[];
  unfinished: number;
  lockedAtEnd: number;
  finishMs: number;
}

export async function killSpread(
  h: Harness,
  o: { windows: number; kills: number; stallMs: number; boundMs: number; progress: () => Promise<number> },
): Promise<KillRun> {
  // Progress when the current worker was started: each kill waits for its mark and for that
  // worker to have applied a window itself; a system that stalls (its work held by a dead
  // worker) is killed anyway after stallMs, and one that has finished is not killed again.
  let since = await o.progress();
  let worker = await h.spawn();
  const progressAtKills: number[] = [];
  try {
    for (let k = 1; k <= o.kills; k++) {
      const mark = Math.round((o.windows * k) / (o.kills + 1));
      const stallAt = Date.now() + o.stallMs;
      let seen = since;
      let checked = Date.now();
      let finished = false;
      while ((seen < mark || seen === since) && Date.now() < stallAt) {
        await sleep(5);
        seen = await o.progress();
        if (Date.now() - checked > 500) {
          checked = Date.now();
          if ((await h.pending()).pending === 0) {
            finished = true;
            break;
          }
        }
      }
      if (finished) break;
      await worker.stop('SIGKILL');
      progressAtKills.push(seen);
      await h.afterKill();
      since = await o.progress();
      worker = await h.spawn();
    }
    const restarted = Date.now();
    let left = await h.pending();
    while (left.pending > 0 && Date.now() - restarted < o.boundMs) {
      await sleep(200);
      left = await h.pending();
    }
    return {
      kills: progressAtKills.length,
      progressAtKills,
      unfinished: left.pending,
      lockedAtEnd: left.locked,
      finishMs: Date.now() - restarted,
    };
  } finally {
    await worker.stop('SIGKILL');
  }
}
