// Bench-only workflows, bundled with the real ones: a trivial child and a parent that runs
// N of them with the same bounded concurrency as a backfill (the bare Temporal ceiling).
import { executeChild } from '@temporalio/workflow';

export * from '../workflows/index.js';

export async function trivial(): Promise<number> {
  return 1;
}

export async function bareFanOut(input: { n: number; concurrency: number; prefix: string }): Promise<number> {
  let next = 0;
  let done = 0;
  async function lane(): Promise<void> {
    while (next < input.n) {
      const i = next++;
      done += await executeChild(trivial, { workflowId: `${input.prefix}-${i}` });
    }
  }
  await Promise.all(Array.from({ length: input.concurrency }, lane));
  return done;
}
