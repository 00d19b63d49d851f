// The Temporal SDK runtime of a process: its log level, the signals that stop workers and where
// the SDK serves its own Prometheus metrics.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';

/**
 * Installs the runtime. `ownSignals`: the process stops its workers itself on SIGINT/SIGTERM (npm
 * start stops them first, then what they use); otherwise the runtime shuts workers down on them.
 * `sdkMetrics`: host:port where the SDK serves its metrics (temporal_*) on /metrics.
 */
export function installRuntime(
  level: LogLevel = 'WARN',
  opts: { ownSignals?: boolean; sdkMetrics?: string } = {},
): void {
  Runtime.install({
    logger: new DefaultLogger(level),
    ...(opts.ownSignals ? { shutdownSignals: [] } : {}),
    ...(opts.sdkMetrics
      ? { telemetryOptions: { metrics: { prometheus: { bindAddress: opts.sdkMetrics } } } }
      : {}),
  });
}
