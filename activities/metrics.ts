// What the activities tell the process's metrics: each window's outcome as the activity decided it.
// Entry points hand in a Prometheus-backed sink (workers/metrics.ts); without one nothing is counted.
import { ApplicationFailure } from '@temporalio/common';
import { FAILURE } from '../contract/failures.js';

export type WindowOutcome = 'processed' | 'skipped' | 'failed';

export interface WindowEvent {
  readonly job: string;
  readonly outcome: WindowOutcome;
  /** skipped: `already-done` or `running`; failed: the failure type (a FAILURE value), else `error`. */
  readonly reason?: string;
  /** How long the attempt took, when it ran the window (processed or failed). */
  readonly seconds?: number;
}

export interface MetricsSink {
  window(event: WindowEvent): void;
}

export const noMetrics: MetricsSink = { window: () => undefined };

const FAILURE_TYPES = new Set<string>(Object.values(FAILURE));

/** A bounded label for a failure: its declared type, never its message (which may carry data). */
export function failureReason(err: unknown): string {
  return err instanceof ApplicationFailure && err.type && FAILURE_TYPES.has(err.type) ? err.type : 'error';
}
