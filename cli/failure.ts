// What the CLI prints for an error: the cause a person can act on, never the wrapper's generic text
// ("Workflow execution failed", "Activity task failed") nor a stack trace, with secrets redacted.
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure } from '@temporalio/common';

const MAX_DEPTH = 20;

/** The error and its causes, outermost first (a cycle or a very deep chain stops the walk). */
function chainOf(err: Error): Error[] {
  const chain: Error[] = [err];
  for (let e = err.cause; e instanceof Error && !chain.includes(e) && chain.length < MAX_DEPTH; e = e.cause)
    chain.push(e);
  return chain;
}

/** An error's own text; a connection error without one (AggregateError) says what its parts say. */
function textOf(e: Error): string {
  if (e.message.trim()) return e.message.trim();
  if (e instanceof AggregateError)
    return [...new Set(e.errors.map((x) => (x instanceof Error ? x.message : String(x))))].join('; ');
  return '';
}

/**
 * The innermost message of an error's cause chain (where Temporal keeps the activity's or the
 * workflow's own error), with where it came from: its failure type, the activity or the child
 * workflow it failed in. Only messages: stacks and failure details stay out.
 */
export function failureMessage(err: unknown, redact: (text: string) => string = (t) => t): string {
  if (!(err instanceof Error)) return redact(String(err));
  const chain = chainOf(err);
  // tidemark's own database errors already say the cause and the fix (db/database.ts).
  const own = chain.find((e) => e.name === 'DatabaseError' && textOf(e));
  const innermost = own ?? [...chain].reverse().find((e) => textOf(e)) ?? err;
  const where: string[] = [];
  if (innermost instanceof ApplicationFailure && innermost.type && innermost.type !== 'Error')
    where.push(innermost.type);
  for (const e of chain) {
    if (e === innermost) break;
    if (e instanceof ChildWorkflowFailure) where.push(`in workflow ${e.execution.workflowId}`);
    else if (e instanceof ActivityFailure) where.push(`in activity ${e.activityType}`);
  }
  const text = textOf(innermost) || innermost.name;
  return redact(where.length ? `${text} (${where.join(', ')})` : text);
}
