// Raising bad input from an activity: a non-retryable failure of a type from contract/failures.ts.
import { ApplicationFailure } from '@temporalio/common';
import type { FailureType } from '../contract/failures.js';

/** How far a worker's clock may lag the Temporal server's before "not closed yet" is bad input. */
export const CLOCK_SKEW_TOLERANCE_MS = 60_000;

export function badInput(type: FailureType, message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type);
}

/** A secret in an error must not reach the logs, the ledger, or Temporal's history. */
export function redactError(err: unknown, redact: (t: string) => string): string {
  for (let e: unknown = err; e instanceof Error; e = e.cause) {
    e.message = redact(e.message);
    if (e.stack) e.stack = redact(e.stack);
  }
  return err instanceof Error ? err.message : redact(String(err));
}
