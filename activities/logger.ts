// The small logger interface activities log through; the worker hands in a console one.
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export function consoleLogger(prefix = ''): Logger {
  const line = (level: string, message: string) => `${new Date().toISOString()} ${level} ${prefix}${message}`;
  return {
    info: (m) => console.log(line('INFO', m)),
    warn: (m) => console.warn(line('WARN', m)),
    error: (m) => console.error(line('ERROR', m)),
  };
}

/** Keeps every line; for tests that assert what was logged. */
export function memoryLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
}
