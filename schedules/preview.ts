// Preview of a job: when its tick fires next and which windows come next, before anything runs.
import { Cron } from 'croner';
import type { Job } from './job.js';
import { isoUtc, windowAt, windowsFrom } from './windows.js';

export interface JobPreview {
  job: string;
  tick: { cron: string; timezone: string; derived: boolean; next: string[] };
  windows: { start: string; end: string; processableFrom: string }[];
}

export function previewJob(job: Job, now: Date, count = 5): JobPreview {
  const cron = new Cron(job.tick.cron, { timezone: job.tick.timezone, mode: '5-part', paused: true });
  const next = cron.nextRuns(count, now).map(isoUtc);
  const first = windowAt(job.grid, job.timezone, now).start;
  const windows = [...windowsFrom(job.grid, job.timezone, first, () => true, count)].map((w) => ({
    start: isoUtc(w.start),
    end: isoUtc(w.end),
    processableFrom: isoUtc(new Date(w.end.getTime() + job.latenessMs)),
  }));
  return { job: job.name, tick: { ...job.tick, next }, windows };
}

export function formatPreview(p: JobPreview): string {
  return [
    `job ${p.job}`,
    `tick: "${p.tick.cron}" in ${p.tick.timezone}${p.tick.derived ? ' (derived from the grid)' : ''}`,
    ...p.tick.next.map((t) => `  fires ${t}`),
    'windows:',
    ...p.windows.map((w) => `  [${w.start}, ${w.end})  processable from ${w.processableFrom}`),
  ].join('\n');
}
