// The shape of a CLI command: its help, its options, and what it does. A command returns its
// result as data (printed with --json) and as lines (printed otherwise).
import type { ParseArgsConfig } from 'node:util';
import type { CliContext } from './context.js';

export interface CommandResult {
  json: unknown;
  lines: string[];
  /** The command printed its output itself as it went (a stream too large to hold): nothing more. */
  printed?: boolean;
  /** The exit code when the command ran but what it checked failed (a backup that does not verify): 1. */
  exitCode?: number;
}

export interface Command {
  name: string;
  summary: string;
  /** One usage line per form, without the leading "tidemark ". */
  usage: string[];
  options: NonNullable<ParseArgsConfig['options']>;
  run(
    ctx: CliContext,
    args: { positionals: string[]; values: Record<string, string | boolean | undefined> },
  ): Promise<CommandResult>;
}
