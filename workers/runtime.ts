// The Temporal SDK runtime of a process: where its log lines go, at which level, and the signals
// that stop workers.
import { DefaultLogger, Runtime, type LogLevel, type Logger } from '@temporalio/worker';

/**
 * Installs the runtime. `logger`: the SDK's lines go through it (the process's pino logger, which
 * filters by its own level); a DefaultLogger at `level` otherwise. `ownSignals`: the process stops
 * its workers itself on SIGINT/SIGTERM (npm start stops them first, then what they use); otherwise
 * the runtime shuts workers down on them.
 */
export function installRuntime(
  level: LogLevel = 'WARN',
  opts: { ownSignals?: boolean; logger?: Logger } = {},
): void {
  Runtime.install({
    logger: opts.logger ?? new DefaultLogger(level),
    ...(opts.ownSignals ? { shutdownSignals: [] } : {}),
  });
}
