// Failure types the activities raise. Non-retryable ones mean "bad input": retrying cannot help.
import { ApplicationFailure } from '@temporalio/common';

export const FAILURE = Object.freeze({
  unknownJob: 'UnknownJob',
  badWindow: 'BadWindow',
  windowNotClosed: 'WindowNotClosed',
  /** Retryable: closes within the clock-skew tolerance; the activity retries once it has. */
  windowNotClosedYet: 'WindowNotClosedYet',
  countMismatch: 'CountMismatch',
  badRange: 'BadRange',
  badEffect: 'BadEffect',
  /** A local window attempt found the job's attempts spent by attempts lost with their workers. */
  attemptsLost: 'AttemptsLost',
  /** An approved rerun's handler would change something else than the preview its approver saw. */
  changedSinceApproval: 'ChangedSinceApproval',
} as const);
export type FailureType = (typeof FAILURE)[keyof typeof FAILURE];

/** How far a worker's clock may lag the Temporal server's before "not closed yet" is bad input. */
export const CLOCK_SKEW_TOLERANCE_MS = 60_000;

export function badInput(type: FailureType, message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type);
}
