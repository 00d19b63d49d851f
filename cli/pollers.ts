// Whether any worker polls the task queue a command starts work on: a backfill or a trigger with
// none would otherwise wait silently until one comes.
import type { Client } from '@temporalio/client';

const WORKFLOW_TASK_QUEUE = 1;

/** What to tell the person when no worker polls `taskQueue` (undefined when one does, or it cannot be told). */
export async function noWorkerNote(
  client: Client,
  taskQueue: string,
  what: string,
): Promise<string | undefined> {
  try {
    const q = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueue },
      taskQueueType: WORKFLOW_TASK_QUEUE,
    });
    if ((q.pollers ?? []).length > 0) return undefined;
  } catch {
    return undefined; // a server that cannot describe it: the command goes on as before
  }
  return `no worker polls task queue "${taskQueue}" (TIDEMARK_TASK_QUEUE): ${what} waits until one does; start one with npx tidemark worker (same DATABASE_URL, TEMPORAL_ADDRESS and task queue)`;
}
