// The running activity's Temporal context, or undefined where the code runs outside one: an
// activity function called directly (the CLI, npm start, deliverNow, a test).
import { Context } from '@temporalio/activity';

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/** Activity heartbeats when running under Temporal; a no-op when called directly or as a local activity. */
export function heartbeater(): (details?: unknown) => void {
  const ctx = activityContext();
  if (!ctx || ctx.info.isLocal) return () => undefined;
  return (details) => ctx.heartbeat(details);
}

export function attemptInfo(): {
  attempt: number;
  workflowId: string | null;
  runId: string | null;
  isLocal: boolean;
} {
  const info = activityContext()?.info;
  if (!info) return { attempt: 1, workflowId: null, runId: null, isLocal: false };
  return {
    attempt: info.attempt,
    workflowId: info.workflowExecution?.workflowId ?? null,
    runId: info.workflowExecution?.runId ?? null,
    isLocal: info.isLocal,
  };
}
