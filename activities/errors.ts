// Failure types the activities raise. Non-retryable ones mean "bad input": retrying cannot help.
import { ApplicationFailure } from '@temporalio/common';

export const FAILURE = Object.freeze({
  unknownJob: 'UnknownJob',
  badWindow: 'BadWindow',
  windowNotClosed: 'WindowNotClosed',
  countMismatch: 'CountMismatch',
  badRange: 'BadRange',
  badEffect: 'BadEffect',
} as const);
export type FailureType = (typeof FAILURE)[keyof typeof FAILURE];

export function badInput(type: FailureType, message: string): ApplicationFailure {
  return ApplicationFailure.nonRetryable(message, type);
}
