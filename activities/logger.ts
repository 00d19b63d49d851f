// The small logger interface activities log through; the worker hands in its pino one (workers/log.ts).

/** Structured fields of a line: the message keeps its text, the fields make it searchable. */
export type LogFields = Readonly<Record<string, string | number | boolean | null | undefined>>;

export interface Logger {
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

export function consoleLogger(prefix = ''): Logger {
  const line = (level: string, message: string) => `${new Date().toISOString()} ${level} ${prefix}${message}`;
  return {
    info: (m) => console.log(line('INFO', m)),
    warn: (m) => console.warn(line('WARN', m)),
    error: (m) => console.error(line('ERROR', m)),
  };
}

type Level = 'info' | 'warn' | 'error';

/** Keeps every line; for tests that assert what was logged (`lines`) and with which fields (`entries`). */
export function memoryLogger(): Logger & {
  lines: string[];
  entries: { level: Level; message: string; fields?: LogFields }[];
} {
  const lines: string[] = [];
  const entries: { level: Level; message: string; fields?: LogFields }[] = [];
  const at =
    (level: Level) =>
    (message: string, fields?: LogFields): void => {
      lines.push(message);
      entries.push(fields ? { level, message, fields } : { level, message });
    };
  return { lines, entries, info: at('info'), warn: at('warn'), error: at('error') };
}
