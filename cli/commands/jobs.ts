// jobs: the catalog with each job's schedule, next fires, pause state, watermark, lag and last run.
import { jobsOverview } from '../../operator/overview.js';
import type { Command } from '../command.js';
import { table } from '../context.js';

export const jobsCommand: Command = {
  name: 'jobs',
  summary: 'every job: schedule, next fire times, paused, watermark, lag, last run',
  usage: ['jobs [--json]'],
  options: {},
  async run(ctx) {
    const rows = await jobsOverview(await ctx.db(), await ctx.client(), ctx.catalog);
    return {
      json: rows,
      lines: table(
        ['JOB', 'GRID', 'SCHEDULE', 'STATE', 'NEXT FIRE', 'WATERMARK', 'LAG', 'LAST RUN', 'LAST DRILL'],
        rows.map((r) => [
          r.job,
          r.grid,
          r.schedule,
          !r.scheduled
            ? 'no schedule'
            : r.paused
              ? `paused${r.pauseNote ? ` (${r.pauseNote})` : ''}`
              : 'active',
          r.nextFires[0] ?? null,
          r.watermark,
          r.lagWindows,
          r.lastRun ? `${r.lastRun.outcome} ${r.lastRun.durationMs} ms at ${r.lastRun.finishedAt}` : null,
          !('lastDrill' in r)
            ? null
            : r.lastDrill
              ? `${r.lastDrill.ok ? 'passed' : 'FAILED'} at ${r.lastDrill.at}`
              : 'never',
        ]),
      ),
    };
  },
};
