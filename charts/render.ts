// Charts drawn on the server by one library (echarts' server-side SVG renderer), for the page (SVG)
// and for e-mails (PNG, rasterised by resvg from npm's prebuilt binaries, with a font shipped in
// npm's DejaVu package, so a chart looks the same on every host and needs no system fonts).
// Both libraries are loaded at the first chart, not at import: every process that reads the catalog
// (each CLI command, the page) imports this through the report job, and loading them took a second.
import { createRequire } from 'node:module';
import type * as Echarts from 'echarts';
import type * as ResvgJs from '@resvg/resvg-js';

export type ChartOption = Echarts.EChartsOption;

const require = createRequire(import.meta.url);
let libraries: { echarts: typeof Echarts; Resvg: typeof ResvgJs.Resvg } | undefined;
const lib = () =>
  (libraries ??= {
    echarts: require('echarts') as typeof Echarts,
    Resvg: (require('@resvg/resvg-js') as typeof ResvgJs).Resvg,
  });

const FONT_FAMILY = 'DejaVu Sans';
const fontFiles = ['DejaVuSans.ttf', 'DejaVuSans-Bold.ttf'].map((f) =>
  require.resolve(`dejavu-fonts-ttf/ttf/${f}`),
);

/** The chart as an SVG document. No animation, and the instance is disposed (it holds timers otherwise). */
export function chartSvg(option: ChartOption, size: { width: number; height: number }): string {
  const chart = lib().echarts.init(null, null, { renderer: 'svg', ssr: true, ...size });
  try {
    chart.setOption({ animation: false, textStyle: { fontFamily: FONT_FAMILY }, ...option });
    return chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
}

/** The chart as a PNG, at `scale` times its size (2 for sharp text on high-density screens). */
export function chartPng(option: ChartOption, size: { width: number; height: number }, scale = 2): Buffer {
  const svg = chartSvg(option, size);
  const png = new (lib().Resvg)(svg, {
    font: { loadSystemFonts: false, fontFiles, defaultFontFamily: FONT_FAMILY },
    fitTo: { mode: 'zoom', value: scale },
    background: '#ffffff',
  }).render();
  return png.asPng();
}

const escapeXml = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** The SVG with a <title> (its accessible name, and the tooltip where it is opened alone) and role img. */
export function svgWithTitle(svg: string, title: string): string {
  return svg.replace(
    /<svg\b([^>]*)>/,
    (_, attrs: string) => `<svg${attrs} role="img"><title>${escapeXml(title)}</title>`,
  );
}
