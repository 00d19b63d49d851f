// jobs: the catalog with each job's schedule, next fires, pause state, watermark, lag and last run.
import { ScheduleNotFoundError } from '@temporalio/client';
import { windowsBehind } from '../../activities/watch.js';
import { readWatermark } from '../../db/ledger.js';
import { scheduleIdOf } from '../../schedules/sync.js';
import { isoUtc } from '../../schedules/windows.js';
import type { Command } from '../command.js';
import { table } from '../context.js';

export const jobsCommand: Command = {
  name: 'jobs',
  summary: 'every job: schedule, next fire times, paused, watermark, lag, last run',
  usage: ['jobs [--json]'],
  options: {},
  async run(ctx) {
    const [db, client] = [await ctx.db(), await ctx.client()];
    const now = new Date();
    const rows = [];
    for (const job of ctx.catalog.jobs) {
      let paused: boolean | null = null;
      let next: string[] = [];
      let note: string | null = null;
      try {
        const d = await client.schedule.getHandle(scheduleIdOf(job.name)).describe();
        paused = d.state.paused;
        note = d.state.note ?? null;
        next = d.info.nextActionTimes.slice(0, 2).map(isoUtc);
      } catch (err) {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      }
      const watermark = await readWatermark(db, job.name);
      const last = await db.selectFrom('job_runs').select(['window_start', 'outcome', 'duration_ms', 'finished_at'])
        .where('job', '=', job.name).where('kind', '=', 'window').orderBy('id', 'desc').limit(1).executeTakeFirst();
      rows.push({
        job: job.name, grid: job.grid.label, timezone: job.timezone, schedule: `${job.tick.cron} ${job.tick.timezone}`,
        scheduled: paused !== null, paused, pauseNote: paused ? note : null, nextFires: next,
        watermark: watermark ? isoUtc(watermark) : null, lagWindows: watermark ? windowsBehind(job, watermark, now) : null,
        lastRun: last ? { window: last.window_start ? isoUtc(last.window_start) : null, outcome: last.outcome, durationMs: last.duration_ms, finishedAt: isoUtc(last.finished_at) } : null,
      });
    }
    return {
      json: rows,
      lines: table(['JOB', 'GRID', 'SCHEDULE', 'STATE', 'NEXT FIRE', 'WATERMARK', 'LAG', 'LAST RUN'], rows.map((r) => [
        r.job, r.grid, r.schedule, !r.scheduled ? 'no schedule' : r.paused ? `paused${r.pauseNote ? ` (${r.pauseNote})` : ''}` : 'active',
        r.nextFires[0] ?? null, r.watermark, r.lagWindows, r.lastRun ? `${r.lastRun.outcome} ${r.lastRun.durationMs} ms at ${r.lastRun.finishedAt}` : null,
      ])),
    };
  },
};
