// The tidemark CLI: one command, help on every subcommand, strict arguments, exit codes
// (0 done, 1 failed, 2 usage) and --json output. `npx tidemark help` lists the commands.
import { isEntryPoint } from '../config/entry.js';
import { parseArgs } from 'node:util';
import { redactorFromConfig } from '../workers/channels.js';
import { CatalogSourceError, loadCatalog, useCatalogFlag } from '../config/catalog-source.js';
import { ConfigError, loadConfig } from '../config/env.js';
import { UnknownJobError } from '../schedules/define.js';
import type { Command } from './command.js';
import { backfillCommand } from './commands/backfill.js';
import { backupsCommand } from './commands/backups.js';
import { pauseCommand, resumeCommand, triggerCommand } from './commands/control.js';
import { jobsCommand } from './commands/jobs.js';
import {
  effectsCommand,
  incidentsCommand,
  migrateCommand,
  previewCommand,
  schedulesCommand,
  syncCommand,
} from './commands/misc.js';
import { loginCommand, logoutCommand, whoamiCommand } from './commands/login.js';
import { quarantineCommand } from './commands/quarantine.js';
import { approveCommand, rejectCommand, rerunCommand, rerunsCommand } from './commands/rerun.js';
import { runsCommand, statusCommand } from './commands/status.js';
import { CliContext, EXIT, UsageError, type CliIO } from './context.js';
import { DateArgumentError } from '../operator/dates.js';
import { failureMessage } from './failure.js';
import { SERVICES } from './services.js';

export const COMMANDS: readonly Command[] = [
  migrateCommand,
  jobsCommand,
  statusCommand,
  runsCommand,
  previewCommand,
  triggerCommand,
  pauseCommand,
  resumeCommand,
  backfillCommand,
  rerunCommand,
  approveCommand,
  rejectCommand,
  rerunsCommand,
  loginCommand,
  logoutCommand,
  whoamiCommand,
  schedulesCommand,
  syncCommand,
  effectsCommand,
  incidentsCommand,
  quarantineCommand,
  backupsCommand,
];

const FOOTER = [
  "Dates: ISO-8601 instants, or plain dates and times (2026-03-01, 2026-03-01T10:00) in the job's time zone.",
  'Catalog: --catalog <module>, else TIDEMARK_CATALOG, else ./tidemark.config.js|mjs|ts, else the demo catalog.',
  'Environment: DATABASE_URL, TEMPORAL_ADDRESS (default 127.0.0.1:7233), TEMPORAL_NAMESPACE, TIDEMARK_TASK_QUEUE;',
  '  Temporal TLS and keys: TEMPORAL_API_KEY, TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,',
  '  TEMPORAL_TLS_SERVER_CA_CERT_PATH, or a TOML profile (TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE).',
  'Exit codes: 0 done, 1 the command failed, 2 the command line is wrong.',
];

function help(command?: Command): string[] {
  if (command)
    return [`${command.summary}`, '', ...command.usage.map((u) => `  tidemark ${u}`), '', ...FOOTER];
  return [
    'tidemark <command> [options] [--json]',
    '',
    ...COMMANDS.map((c) => `  ${c.name.padEnd(11)} ${c.summary}`),
    '',
    ...SERVICES.map((s) => `  ${s.name.padEnd(11)} ${s.summary}`),
    '',
    'tidemark help <command> for its options.',
    ...FOOTER,
  ];
}

export const isUsageError = (err: unknown): boolean =>
  err instanceof UsageError ||
  err instanceof DateArgumentError ||
  err instanceof UnknownJobError ||
  err instanceof ConfigError ||
  err instanceof CatalogSourceError ||
  (err as { code?: string })?.code?.startsWith('ERR_PARSE_ARGS') === true;

/** Takes `--catalog <path>` (or `--catalog=<path>`) out of the command line, wherever it is. */
export function takeCatalogOption(argv: string[]): { argv: string[]; catalog: string | undefined } {
  const rest: string[] = [];
  let catalog: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--catalog') {
      catalog = argv[++i];
      if (catalog === undefined) throw new UsageError('--catalog needs a path');
    } else if (arg.startsWith('--catalog=')) catalog = arg.slice('--catalog='.length);
    else rest.push(arg);
  }
  return { argv: rest, catalog };
}

/** Runs one command line; returns the exit code. Output goes through `io`. */
export async function run(fullArgv: string[], io: CliIO): Promise<number> {
  let argv: string[];
  try {
    const taken = takeCatalogOption(fullArgv);
    argv = taken.argv;
    useCatalogFlag(taken.catalog);
  } catch (err) {
    io.err(`tidemark: ${(err as Error).message}`);
    return EXIT.usage;
  }
  const name = argv[0];
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const command = COMMANDS.find((c) => c.name === argv[1]);
    if (argv[1] && !command) {
      io.err(`tidemark: unknown command "${argv[1]}"`);
      return EXIT.usage;
    }
    help(command).forEach(io.out);
    return EXIT.ok;
  }
  const service = SERVICES.find((s) => s.name === name);
  if (service) {
    try {
      await service.start(argv.slice(1));
      return EXIT.ok;
    } catch (err) {
      // A process's own errors say what to do (PostgreSQL unreachable, a setting missing).
      io.err(`tidemark ${name}: ${err instanceof Error ? err.message : String(err)}`);
      return isUsageError(err) ? EXIT.usage : EXIT.failed;
    }
  }
  const command = COMMANDS.find((c) => c.name === name);
  if (!command) {
    io.err(`tidemark: unknown command "${name}"`);
    help().forEach(io.err);
    return EXIT.usage;
  }
  let ctx: CliContext | undefined;
  try {
    const { positionals, values } = parseArgs({
      args: argv.slice(1),
      allowPositionals: true,
      strict: true,
      options: { ...command.options, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    });
    if (values.help) {
      help(command).forEach(io.out);
      return EXIT.ok;
    }
    const out: CliIO = { ...io, json: !!values.json };
    const config = loadConfig();
    ctx = new CliContext(out, config, await loadCatalog(config));
    const result = await command.run(ctx, {
      positionals,
      values: values as Record<string, string | boolean | undefined>,
    });
    if (result.printed) return EXIT.ok;
    if (out.json) io.out(JSON.stringify(result.json, null, 2));
    else result.lines.forEach(io.out);
    return result.exitCode ?? EXIT.ok;
  } catch (err) {
    const usage = isUsageError(err);
    // Secrets known to the configuration never reach the terminal, even inside a worker's message.
    const redact = ctx ? redactorFromConfig(ctx.config) : undefined;
    io.err(`tidemark ${name}: ${failureMessage(err, redact)}`);
    if (usage) io.err(`usage: ${command.usage.map((u) => `tidemark ${u}`).join('\n       ')}`);
    return usage ? EXIT.usage : EXIT.failed;
  } finally {
    await ctx?.close();
  }
}

if (isEntryPoint(import.meta.url)) {
  const io: CliIO = {
    out: (l) => console.log(l),
    err: (l) => console.error(l),
    json: false,
    tty: !!process.stdout.isTTY,
  };
  run(process.argv.slice(2), io).then((code) => process.exit(code));
}
