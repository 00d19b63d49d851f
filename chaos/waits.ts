// Waiting through faults: a probe polled until it answers, a call retried while a server it
// needs restarts, and a lock that runs one task at a time.
import { setTimeout as sleep } from 'node:timers/promises';

/** Serialises the faults that stop a whole server, and partitions (at most one host at a time). */
export class Mutex {
  private tail = Promise.resolve();
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/** Retries `fn` while a server it needs is down (a restart in progress), up to `ms`. */
export async function persist<T>(what: string, fn: () => Promise<T>, ms = 120_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`${what}: ${(err as Error).message}`, { cause: err });
      await sleep(500);
    }
  }
}

export async function until<T>(
  what: string,
  ms: number,
  probe: () => Promise<T | undefined>,
): Promise<T | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    let v: T | undefined;
    try {
      v = await probe();
    } catch {
      v = undefined; // a server restarting: try again
    }
    if (v !== undefined) return v;
    if (Date.now() > deadline) return undefined;
    await sleep(100);
  }
}
