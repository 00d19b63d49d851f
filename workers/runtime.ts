// The Temporal SDK runtime of a process: its log level and the signals that stop workers.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';

/**
 * Installs the runtime. `ownSignals`: the process stops its workers itself on SIGINT/SIGTERM (npm
 * start stops them first, then what they use); otherwise the runtime shuts workers down on them.
 */
export function installRuntime(level: LogLevel = 'WARN', opts: { ownSignals?: boolean } = {}): void {
  Runtime.install({ logger: new DefaultLogger(level), ...(opts.ownSignals ? { shutdownSignals: [] } : {}) });
}
