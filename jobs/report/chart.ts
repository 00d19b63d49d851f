// The report's chart: one bar chart per measure (two measures, such as orders and revenue, are two
// charts one above the other sharing the category axis, so each keeps its own scale and unit),
// with a title, named axes, category labels in the job's zone and the value on every bar. Drawn
// by charts/render.ts, the library the page's charts use, and sent inline as a PNG.
import { chartPng, type ChartOption } from '../../charts/render.js';

export interface ReportChartMeasure {
  name: string;
  /** Shown on the value axis, e.g. "EUR"; none for a plain count. */
  unit?: string;
  decimals: number;
  values: readonly number[];
}

export interface ReportChart {
  title: string;
  /** The category axis's name, the zone included, e.g. "Hour (Europe/Berlin)". */
  categoryName: string;
  categories: readonly string[];
  /** One or two measures, each its own chart. */
  measures: readonly ReportChartMeasure[];
}

/** The size the chart is drawn at and shown at in the e-mail (its PNG has twice the pixels). */
export const REPORT_CHART_WIDTH = 640;
const PANEL_HEIGHT = 230;
const HEADER = 56;

/** Past a dozen bars a horizontal label no longer fits its slot: labels and values stand upright. */
const crowdedAt = 12;
/** Below each panel: its category labels (upright ones as long as the longest) and the axis name. */
const labelRoom = (c: ReportChart) =>
  c.categories.length > crowdedAt ? 12 + 7 * Math.max(0, ...c.categories.map((l) => l.length)) : 24;

export function reportChartSize(c: ReportChart): { width: number; height: number } {
  return {
    width: REPORT_CHART_WIDTH,
    height: HEADER + c.measures.length * (PANEL_HEIGHT + labelRoom(c) + 32),
  };
}

const axisName = (m: ReportChartMeasure) => (m.unit ? `${m.name} (${m.unit})` : m.name);
const formatValue = (v: number, decimals: number) =>
  v.toLocaleString('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });

export function reportChartOption(c: ReportChart): ChartOption {
  const crowded = c.categories.length > crowdedAt;
  const room = labelRoom(c);
  const panels = c.measures.map((m, i) => ({ m, top: HEADER + i * (PANEL_HEIGHT + room + 32) }));
  return {
    backgroundColor: '#ffffff',
    color: ['#2563eb', '#0f766e'],
    title: { text: c.title, left: 8, top: 6, textStyle: { fontSize: 16, color: '#111827' } },
    grid: panels.map(({ top }) => ({ left: 76, right: 16, top: top + 22, height: PANEL_HEIGHT - 22 })),
    xAxis: panels.map((_, i) => ({
      type: 'category' as const,
      gridIndex: i,
      data: [...c.categories],
      name: c.categoryName,
      nameLocation: 'middle' as const,
      nameGap: room + 4,
      nameTextStyle: { color: '#374151', fontSize: 12 },
      axisTick: { alignWithLabel: true },
      axisLabel: { interval: 0, rotate: crowded ? 90 : 0, color: '#374151', fontSize: 11 },
      axisLine: { lineStyle: { color: '#6b7280' } },
    })),
    yAxis: panels.map(({ m }, i) => ({
      type: 'value' as const,
      gridIndex: i,
      name: axisName(m),
      nameLocation: 'end' as const,
      nameGap: 10,
      nameTextStyle: { color: '#374151', fontSize: 12, align: 'left' as const, padding: [0, 0, 0, -68] },
      // Room above the tallest bar for its value, the axis ending on a round tick.
      ...valueScale(Math.max(0, ...m.values) * (crowded ? 1.45 : 1.12), m.decimals),
      axisLabel: { color: '#374151', fontSize: 11 },
      splitLine: { lineStyle: { color: '#e5e7eb' } },
    })),
    series: panels.map(({ m }, i) => ({
      type: 'bar' as const,
      name: axisName(m),
      xAxisIndex: i,
      yAxisIndex: i,
      data: [...m.values],
      barMaxWidth: 40,
      label: {
        show: true,
        position: 'top' as const,
        ...(crowded ? { rotate: 90, align: 'left' as const, verticalAlign: 'middle' as const } : {}),
        color: '#111827',
        fontSize: 10,
        formatter: (p: { value: unknown }) => formatValue(Number(p.value), m.decimals),
      },
    })),
  };
}

/** About five round steps (1, 2, 2.5 or 5 times a power of ten) from 0 to at least `top`. */
function valueScale(top: number, decimals: number): { min: number; max: number; interval: number } {
  const raw = Math.max(top / 5, decimals === 0 ? 1 : 10 ** -decimals);
  const power = 10 ** Math.floor(Math.log10(raw));
  // 2.5 only where it is not a fraction of a count.
  const factors = decimals === 0 && power < 10 ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10];
  const interval = factors.map((f) => f * power).find((step) => step >= raw)!;
  return { min: 0, max: Math.max(interval, Math.ceil(top / interval) * interval), interval };
}

export function reportChartPng(c: ReportChart): Buffer {
  return chartPng(reportChartOption(c), reportChartSize(c));
}
