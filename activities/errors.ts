// Raising bad input from an activity: a non-retryable failure of a type from contract/failures.ts.
import { ApplicationFailure } from '@temporalio/common';
import type { FailureType } from '../contract/failures.js';

/** How far a worker's clock may lag the Temporal server's before "not closed yet" is bad input. */
export const CLOCK_SKEW_TOLERANCE_MS = 60_000;

export function badInput(type: FailureType, message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type);
}
