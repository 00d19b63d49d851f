// Starting window children: one id per window, abandoned when the parent closes, and a
// window that is already running elsewhere reported as such instead of failing.
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import {
  ParentClosePolicy,
  startChild,
  WorkflowIdReusePolicy,
  type ChildWorkflowHandle,
} from '@temporalio/workflow';
import { searchAttributes } from '../contract/search-attributes.js';
import {
  WINDOW_REVISION,
  type ActivityPolicy,
  type Trigger,
  type WindowInput,
  type WindowSpec,
} from '../contract/workflows.js';
import { window } from './window.js';

/** `handle` is null when the window was already running elsewhere. */
export interface ChildStart {
  key: string;
  handle: ChildWorkflowHandle<typeof window> | null;
}

export async function startWindow(
  w: WindowSpec,
  trigger: Trigger,
  policy: ActivityPolicy,
  extra: Partial<Pick<WindowInput, 'afterBatch'>> = {},
): Promise<ChildStart> {
  try {
    const handle = await startChild(window, {
      workflowId: w.key,
      args: [{ ...w, trigger, policy, revision: WINDOW_REVISION, ...extra }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: searchAttributes('window', w.job, { start: w.start, generation: w.generation }),
      staticSummary: `${w.job}: window [${w.start}, ${w.end})${w.generation ? ` generation ${w.generation}` : ''}, started by ${trigger}`,
      // A completed window may be presented again: the ledger answers `already-done`.
      workflowIdReusePolicy: WorkflowIdReusePolicy.ALLOW_DUPLICATE,
    });
    return { key: w.key, handle };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return { key: w.key, handle: null };
    throw err;
  }
}
