// window: one window of one job. Its workflow id is the window key, so the engine refuses a
// second copy while it runs; the ledger refuses one after it is done.
import { workflowInfo } from '@temporalio/workflow';
import { windowActivity } from './policy.js';
import type { WindowInput, WindowResult } from './types.js';

export async function window(input: WindowInput): Promise<WindowResult> {
  const { processWindow } = windowActivity(input.policy);
  return await processWindow({ ...input, key: input.key || workflowInfo().workflowId });
}
