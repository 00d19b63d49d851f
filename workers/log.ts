// The process's logger (pino): JSON lines on stdout for workers, readable lines for npm start. Our
// lines and the Temporal SDK's go through it; secrets are redacted from the message and every field.
import { pino, stdTimeFunctions, type DestinationStream, type Logger as Pino } from 'pino';
import pretty from 'pino-pretty';
import type { LogLevel as SdkLevel, Logger as SdkLogger, LogMetadata } from '@temporalio/worker';
import type { Logger } from '../activities/logger.js';
import { redactorFromConfig } from './channels.js';
import type { Config } from '../config/env.js';

export type LogFormat = 'json' | 'pretty';
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface LogOptions {
  format: LogFormat;
  level: LogLevel;
  /** The SDK's own level; WARN keeps its per-task lifecycle lines out. */
  sdkLevel?: SdkLevel;
  /** Replaces configured secret values in any text (redactorFromConfig). */
  redact?: (text: string) => string;
  /** stdout when not given. */
  destination?: DestinationStream | NodeJS.WritableStream;
}

export interface Log {
  pino: Pino;
  /** What activities and entry points log through. */
  logger: Logger;
  /** For Runtime.install({ logger }): the SDK's lines, with their meta (workflowId, activityType, ...) as fields. */
  sdk: SdkLogger;
}

/**
 * Fields whose values are secrets whatever they hold: pino's redact paths at the top level, and
 * the same names at any depth in redactDeep (pino's wildcard paths cost 60 us a line).
 */
const SECRET_KEYS = ['password', 'token', 'secret', 'authorization', 'cookie', 'apiKey', 'botToken'];
const SECRET_KEY = new RegExp(`^(${SECRET_KEYS.join('|')})$`, 'i');

/** The options of an entry point: TIDEMARK_LOG_FORMAT wins over the entry point's default format. */
export function logOptionsFromConfig(config: Config, defaultFormat: LogFormat = 'json'): LogOptions {
  return {
    format: config.TIDEMARK_LOG_FORMAT ?? defaultFormat,
    level: config.TIDEMARK_LOG_LEVEL,
    sdkLevel: config.TIDEMARK_SDK_LOG_LEVEL,
    redact: redactorFromConfig(config),
  };
}

/** The password of a URL (scheme://user:password@host), configured as a secret or not. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s@/]+@/gi;

export function createLog(opts: LogOptions): Log {
  const configured = opts.redact ?? ((text: string) => text);
  const redact = (text: string) => configured(text).replace(URL_PASSWORD, '$1***@');
  // Synchronous writes: lines keep their order with console output and survive process.exit.
  const destination =
    opts.format === 'pretty'
      ? pretty({
          sync: true,
          colorize: false,
          translateTime: 'SYS:HH:MM:ss.l',
          ignore: 'pid,hostname',
          // The SDK's fields on the line they belong to, not a block of lines after it.
          singleLine: true,
          // An error's text stays with them (by default pino-pretty puts `error` on lines of its own).
          errorLikeObjectKeys: [],
          ...(opts.destination ? { destination: opts.destination } : {}),
        })
      : (opts.destination ?? pino.destination({ dest: 1, sync: true }));
  const log = pino(
    {
      level: opts.level,
      timestamp: stdTimeFunctions.isoTime,
      redact: { paths: SECRET_KEYS, censor: '***' },
      formatters: {
        level: (label) => ({ level: label }),
        log: (fields) => redactDeep(fields, redact) as Record<string, unknown>,
      },
      hooks: {
        logMethod(args, method) {
          method.apply(
            this,
            args.map((a: unknown) => (typeof a === 'string' ? redact(a) : a)) as Parameters<typeof method>,
          );
        },
      },
    },
    destination as DestinationStream,
  );
  const sdk = log.child({}, { level: (opts.sdkLevel ?? 'WARN').toLowerCase() });
  // An activity's or a workflow's failure as the SDK reports it: its causes in one line (our own
  // FAILED line says the same), the stacks only when its lines are asked for in detail.
  const stacks = opts.sdkLevel === 'DEBUG' || opts.sdkLevel === 'TRACE';
  const sdkMeta = (meta: LogMetadata): LogMetadata =>
    !stacks && meta.error instanceof Error ? { ...meta, error: causeChain(meta.error) } : meta;
  const sdkAt =
    (level: LogLevel) =>
    (message: string, meta?: LogMetadata): void =>
      meta ? sdk[level](sdkMeta(meta), message) : sdk[level](message);
  // Pretty lines leave our fields out: the message says all of them (the SDK's meta stays).
  const withFields = opts.format === 'json';
  const at =
    (level: LogLevel) =>
    (message: string, fields?: object): void =>
      fields && withFields ? log[level](fields, message) : log[level](message);
  return {
    pino: log,
    logger: { info: at('info'), warn: at('warn'), error: at('error') },
    sdk: {
      log: (level, message, meta) => sdkAt(level.toLowerCase() as LogLevel)(message, meta),
      trace: sdkAt('trace'),
      debug: sdkAt('debug'),
      info: sdkAt('info'),
      warn: sdkAt('warn'),
      error: sdkAt('error'),
    },
  };
}

/** An error and its causes, outermost first, as one line: "ActivityFailure: ... <- Error: the cause". */
function causeChain(err: Error): string {
  const parts: string[] = [];
  for (let e: unknown = err, n = 0; e instanceof Error && n < 10; e = e.cause, n++)
    parts.push(`${e.name}: ${e.message}`);
  return parts.join(' <- ');
}

/** A copy with every string redacted, secret-named fields censored; errors become { type, message, stack }. */
function redactDeep(value: unknown, redact: (text: string) => string, depth = 0): unknown {
  if (typeof value === 'string') return redact(value);
  if (value === null || typeof value !== 'object') return value;
  // Left out, not written as it is: pino would write its strings unredacted.
  if (depth > 8) return '[deeper than 8 levels]';
  if (value instanceof Error)
    return {
      type: value.name,
      message: redact(value.message),
      ...(value.stack ? { stack: redact(value.stack) } : {}),
      ...(value.cause !== undefined ? { cause: redactDeep(value.cause, redact, depth + 1) } : {}),
    };
  if (Array.isArray(value)) return value.map((v) => redactDeep(v, redact, depth + 1));
  if (value instanceof Date) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, SECRET_KEY.test(k) ? '***' : redactDeep(v, redact, depth + 1)]),
  );
}
