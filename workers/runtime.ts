// The Temporal SDK runtime of a process: its log level and the signals that stop workers.
import { DefaultLogger, Runtime, type LogLevel } from '@temporalio/worker';

export function installRuntime(level: LogLevel = 'WARN'): void {
  Runtime.install({ logger: new DefaultLogger(level) });
}
