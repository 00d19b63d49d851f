// The Temporal SDK runtime of a process: where its log lines go, at which level, and the signals
// that stop workers.
import { DefaultLogger, Runtime, type LogLevel, type Logger } from '@temporalio/worker';

/**
 * Installs the runtime at `level`. `logger`: the SDK's lines go through it, the native core's
 * forwarded to it as well (otherwise core prints its own to the console); a DefaultLogger
 * otherwise. `ownSignals`: the process stops its workers itself on SIGINT/SIGTERM (npm start stops
 * them first, then what they use); otherwise the runtime shuts workers down on them.
 */
export function installRuntime(
  level: LogLevel = 'WARN',
  opts: { ownSignals?: boolean; logger?: Logger } = {},
): void {
  Runtime.install({
    logger: opts.logger ?? new DefaultLogger(level),
    ...(opts.logger
      ? { telemetryOptions: { logging: { filter: { core: level, other: 'ERROR' }, forward: {} } } }
      : {}),
    ...(opts.ownSignals ? { shutdownSignals: [] } : {}),
  });
}
