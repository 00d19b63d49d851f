// The long-running processes `tidemark <name>` starts: each one runs until SIGINT/SIGTERM.
// Imported only when named, so the short commands do not load a worker or the Slack app.
export interface Service {
  name: string;
  summary: string;
  /** Starts it with the command line's arguments after its name. */
  start(args: readonly string[]): Promise<void>;
}

/** A service that takes no arguments refuses any, rather than ignore a misspelt option. */
function none(name: string, args: readonly string[]): void {
  if (args.length) throw new UsageError(`tidemark ${name} takes no arguments (got ${args.join(' ')})`);
}

import { parseArgs } from 'node:util';
import { parseDuration } from '../schedules/duration.js';
import { UsageError } from './context.js';

export const SERVICES: readonly Service[] = [
  {
    name: 'worker',
    summary: 'a worker on the task queue (run any number, on any hosts)',
    start: async (args) => (none('worker', args), (await import('../workers/worker.js')).runWorker()),
  },
  {
    name: 'web',
    summary: 'the management page (TIDEMARK_WEB_TOKEN, TIDEMARK_WEB_PORT, TIDEMARK_WEB_HOST)',
    start: async (args) => (none('web', args), (await import('../web/main.js')).runWeb()),
  },
  {
    name: 'slack',
    summary: 'the Slack app (SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN)',
    start: async (args) => (none('slack', args), (await import('../slack/main.js')).runSlack()),
  },
  {
    name: 'dev',
    summary:
      'everything on one machine: a Temporal dev server (or TEMPORAL_ADDRESS), worker, page [--backfill 24h]',
    start: async (args) => {
      const { values } = parseArgs({
        args: [...args],
        options: { backfill: { type: 'string' } },
        strict: true,
      });
      const backfill = values.backfill;
      if (backfill !== undefined && !(parseDuration(backfill)! > 0))
        throw new UsageError(`--backfill: "${backfill}" is not a duration such as 24h or 7d`);
      await (await import('../bin/dev.js')).runDev(backfill === undefined ? {} : { backfill });
    },
  },
];
