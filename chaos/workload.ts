// The work the fault suite gives its jobs: orders in the source table for their windows, and the
// workflows that process them (a tick, a backfill, a window run or a rerun), each started through
// the engine and retried while a server it needs restarts.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { policyOf } from '../activities/deps.js';
import { DEMO_SCHEMA } from '../jobs/demo-schema.js';
import type { Catalog } from '../schedules/job.js';
import { laneStart } from './catalog.js';
import { TASK_QUEUE, type Stack } from './stack.js';
import { persist } from './waits.js';

export const HOUR = 3_600_000;
export const MINUTE = 60_000;
export const iso = (d: Date): string => d.toISOString().replace('.000Z', 'Z');
export interface Win {
  start: Date;
  end: Date;
}

/** A lane's windows so far: one an hour from its start. */
export function laneWindows(l: { lane: number; windows: number }): Win[] {
  const t0 = laneStart(l.lane).getTime();
  return Array.from({ length: l.windows }, (_, i) => ({
    start: new Date(t0 + i * HOUR),
    end: new Date(t0 + (i + 1) * HOUR),
  }));
}

export class Workload {
  constructor(
    private readonly stack: Stack,
    private readonly catalog: Catalog,
    /** The run's counter, shared with the armed crash points: each id once. */
    private readonly nextId: () => number,
  ) {}

  async addOrders(job: string, windows: readonly Win[]): Promise<void> {
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
        .withSchema(DEMO_SCHEMA)
        .insertInto('orders')
        .values(rows)
        .onConflict((c) => c.column('order_key').doNothing())
        .execute(),
    );
  }

  private start(workflow: string, workflowId: string, args: unknown[]): Promise<unknown> {
    return persist(`start ${workflowId}`, async () => {
      try {
        return await this.stack.client.workflow.start(workflow, { taskQueue: TASK_QUEUE, workflowId, args });
      } catch (err) {
        if (err instanceof WorkflowExecutionAlreadyStartedError) return null; // the engine refused a copy
        throw err;
      }
    });
  }

  tick(job: string, now: Date) {
    return this.start('tick', `${job}/tick-${this.nextId()}`, [{ job, now: iso(now) }]);
  }

  /** A backfill a page of `pageSize` windows at a time, or with `batch`, its windows in batches. */
  backfill(job: string, from: Date, to: Date, o: { pageSize: number } | { batch: number }) {
    return this.start('backfill', `${job}/backfill-${this.nextId()}`, [
      { job, from: iso(from), to: iso(to), concurrency: 1, ...o },
    ]);
  }

  /** A window run; `copy` gives it another workflow id, so the engine cannot refuse it: the ledger must. */
  runWindow(job: string, w: Win, generation: number, trigger: 'manual' | 'rerun', copy?: number) {
    const key = `${job}/${iso(w.start)}${generation ? `#${generation}` : ''}`;
    const policy = policyOf(this.catalog.get(job));
    return this.start('window', copy ? `${key}~copy-${copy}` : key, [
      { job, start: iso(w.start), end: iso(w.end), generation, key, trigger, policy },
    ]);
  }
}
