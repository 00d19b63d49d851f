// Preview of a job: when its tick fires next and which windows come next, before anything runs.
import { Cron } from 'croner';
import { type Job, type Tick } from './job.js';
import { describeTick } from './define.js';
import { windowAt, windowsFrom } from './windows.js';
import { isoUtc } from '../contract/window-key.js';

export interface JobPreview {
  job: string;
  tick: Tick & { text: string; next: string[] };
  windows: { start: string; end: string; processableFrom: string }[];
}

/** The next `count` fire times strictly after `now`, as the Temporal server computes them. */
function nextFires(tick: Tick, now: Date, count: number): Date[] {
  if (tick.kind === 'cron')
    return new Cron(tick.cron, { timezone: tick.timezone, mode: '5-part', paused: true }).nextRuns(
      count,
      now,
    );
  const first = Math.floor((now.getTime() - tick.offsetMs) / tick.everyMs) + 1;
  return Array.from({ length: count }, (_, i) => new Date((first + i) * tick.everyMs + tick.offsetMs));
}

export function previewJob(job: Job, now: Date, count = 5): JobPreview {
  const next = nextFires(job.tick, now, count).map(isoUtc);
  const first = windowAt(job.grid, job.timezone, now).start;
  const windows = [...windowsFrom(job.grid, job.timezone, first, () => true, count)].map((w) => ({
    start: isoUtc(w.start),
    end: isoUtc(w.end),
    processableFrom: isoUtc(new Date(w.end.getTime() + job.latenessMs)),
  }));
  return { job: job.name, tick: { ...job.tick, text: describeTick(job.tick), next }, windows };
}

export function formatPreview(p: JobPreview): string {
  return [
    `job ${p.job}`,
    `tick: ${p.tick.text}${p.tick.derived ? ' (derived from the grid)' : ''}`,
    ...p.tick.next.map((t) => `  fires ${t}`),
    'windows:',
    ...p.windows.map((w) => `  [${w.start}, ${w.end})  processable from ${w.processableFrom}`),
  ].join('\n');
}
