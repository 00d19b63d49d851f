// What the fault suite watches in the system under test: a window's status in the ledger, a
// round's work settled (its windows done, its effects closed, its runs ended), a run's outcome,
// whether a fault met any work open, which hosts hold a transaction, and the workers' memory and
// descriptors over the run.
import { readdir } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'kysely';
import type { ChaosResults } from './report.js';
import type { Stack } from './stack.js';
import { persist, until } from './waits.js';

export class Observer {
  constructor(private readonly stack: Stack) {}

  async statusOf(key: string): Promise<string | undefined> {
    const row = await this.stack.db
      .selectFrom('job_windows')
      .select('status')
      .where('window_key', '=', key)
      .executeTakeFirst();
    return row?.status;
  }

  /** Settled: every key done, and no effect of the job pending or begun. */
  async settled(job: string, keys: readonly string[], ms: number): Promise<boolean> {
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
  async outcomeOf(workflowId: string, ms: number): Promise<string> {
    return await persist(
      `the run of ${workflowId} to end`,
      async () => {
        try {
          const r = (await this.stack.client.workflow.getHandle(workflowId).result()) as { outcome?: string };
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
  async runEnded(workflowId: string, ms: number): Promise<void> {
    await persist(
      `the run of ${workflowId} to end`,
      async () => {
        try {
          await this.stack.client.workflow.getHandle(workflowId).result();
        } catch (err) {
          const name = (err as Error).name;
          if (name !== 'WorkflowFailedError' && name !== 'WorkflowContinuedAsNewError') throw err;
        }
      },
      ms,
    );
  }

  /** True when every window of `keys` is done and no effect of the job is open: nothing in flight. */
  async idle(job: string, keys: readonly string[]): Promise<boolean> {
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

  /**
   * The host whose drill holds the scratch database `scratch` (the advisory lock a drill takes on
   * its admin session, jobs/backup/target.ts `exclusively`, from before it drops and creates the
   * database until it dropped it again), or undefined.
   */
  async drillHolder(scratch: string): Promise<string | undefined> {
    const rows = await sql<{ application_name: string }>`
      select a.application_name from pg_locks l join pg_stat_activity a on a.pid = l.pid
       where l.locktype = 'advisory' and l.granted
         and l.objid = (hashtext(${`tidemark restore into ${scratch}`})::bigint & 4294967295)::oid
         and a.application_name like 'tidemark-chaos-%'`.execute(this.stack.db);
    return rows.rows[0]?.application_name.replace('tidemark-chaos-', '');
  }

  async backendsInTransaction(): Promise<string[]> {
    const rows = await sql<{ application_name: string }>`
      select application_name from pg_stat_activity
       where application_name like 'tidemark-chaos-%' and xact_start is not null`.execute(this.stack.db);
    return rows.rows.map((r) => r.application_name.replace('tidemark-chaos-', ''));
  }

  /** Each host's worker: resident memory and open file descriptors, every 10 s, until `stopped`. */
  async sample(into: ChaosResults['resources'], stopped: () => boolean): Promise<void> {
    const { readFile } = await import('node:fs/promises');
    while (!stopped()) {
      for (const host of this.stack.hosts.names) {
        const pid = this.stack.workers.pidOf(host);
        if (!pid) continue;
        try {
          const status = await readFile(`/proc/${pid}/status`, 'utf8');
          const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
          const fds = (await readdir(`/proc/${pid}/fd`)).length;
          into.push({ at: Date.now(), host, pid, rssKb, fds });
        } catch {
          // the process just died
        }
      }
      for (let i = 0; i < 50 && !stopped(); i++) await sleep(200);
    }
  }
}
