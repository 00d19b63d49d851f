// Charts drawn on the server by one library (echarts' server-side SVG renderer), for the page (SVG)
// and for e-mails (PNG, rasterised by resvg from npm's prebuilt binaries, with a font shipped in
// npm's DejaVu package, so a chart looks the same on every host and needs no system fonts).
import { createRequire } from 'node:module';
import { Resvg } from '@resvg/resvg-js';
import * as echarts from 'echarts';

export type ChartOption = echarts.EChartsOption;

const FONT_FAMILY = 'DejaVu Sans';
const fontFiles = (() => {
  const require = createRequire(import.meta.url);
  return ['DejaVuSans.ttf', 'DejaVuSans-Bold.ttf'].map((f) => require.resolve(`dejavu-fonts-ttf/ttf/${f}`));
})();

/** The chart as an SVG document. No animation, and the instance is disposed (it holds timers otherwise). */
export function chartSvg(option: ChartOption, size: { width: number; height: number }): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, ...size });
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
  const png = new Resvg(svg, {
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
