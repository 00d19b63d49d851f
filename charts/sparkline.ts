// The page's sparkline of a job's recent window durations: a line oldest to newest, each failed
// run a red dot on it, no axes (the <title> and the page's text carry the figures).
import { chartSvg, svgWithTitle, type ChartOption } from './render.js';

/** One window run as the sparkline draws it (operator/durations.ts reads them from the ledger). */
export interface RunDuration {
  window: string | null;
  generation: number | null;
  outcome: 'processed' | 'failed';
  durationMs: number;
  finishedAt: string;
}

export const SPARKLINE_SIZE = { width: 160, height: 40 };
export const FAILED_COLOUR = '#dc2626';
const LINE_COLOUR = '#3b82f6';

/** 340 ms, 1.2 s, 4.5 min. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** What the sparkline shows, in words: its <title> (read by screen readers and shown on hover). */
export function describeDurations(job: string, runs: readonly RunDuration[]): string {
  if (runs.length === 0) return `${job}: no window runs yet`;
  const ms = runs.map((r) => r.durationMs);
  const failed = runs.filter((r) => r.outcome === 'failed').length;
  return `${job}: durations of the last ${runs.length} window runs, ${formatDuration(Math.min(...ms))} to ${formatDuration(Math.max(...ms))}, latest ${formatDuration(ms.at(-1)!)}; ${failed} failed`;
}

export function durationsSparklineOption(runs: readonly RunDuration[]): ChartOption {
  return {
    // Said in the picture too, so a job with no runs yet shows more than a blank.
    ...(runs.length === 0
      ? {
          title: {
            text: 'no runs yet',
            left: 'center',
            top: 'middle',
            textStyle: { fontSize: 11, fontWeight: 'normal', color: '#6b7280' },
          },
        }
      : {}),
    grid: { left: 3, right: 3, top: 4, bottom: 4 },
    xAxis: { type: 'category', show: false, boundaryGap: false, data: runs.map((_, i) => String(i)) },
    yAxis: { type: 'value', show: false, min: 0 },
    series: [
      {
        type: 'line',
        // A blue that reads on the page's light and dark cards alike (an <img> cannot take the page's colours).
        lineStyle: { color: LINE_COLOUR, width: 1.5 },
        showSymbol: true,
        // Every failure stays visible, however many runs share the width.
        showAllSymbol: true,
        data: runs.map((r) =>
          r.outcome === 'failed'
            ? { value: r.durationMs, symbol: 'circle', symbolSize: 5, itemStyle: { color: FAILED_COLOUR } }
            : // A lone run has no line to sit on: it shows as a dot.
              runs.length === 1
              ? { value: r.durationMs, symbol: 'circle', symbolSize: 5, itemStyle: { color: LINE_COLOUR } }
              : { value: r.durationMs, symbol: 'none' },
        ),
      },
    ],
  };
}

export function durationsSparklineSvg(job: string, runs: readonly RunDuration[]): string {
  return svgWithTitle(chartSvg(durationsSparklineOption(runs), SPARKLINE_SIZE), describeDurations(job, runs));
}
