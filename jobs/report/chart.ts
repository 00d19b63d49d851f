// A bar chart as a PNG (pure JavaScript, no native code): one bar per report row, scaled to
// the largest value, so a trend is seen at a glance. Labels stay in the table next to it.
import { PNG } from 'pngjs';

export function barChartPng(
  values: readonly number[],
  opts: { width?: number; height?: number } = {},
): Buffer {
  const width = opts.width ?? 600;
  const height = opts.height ?? 200;
  const png = new PNG({ width, height });
  const paint = (x: number, y: number, [r, g, b]: readonly [number, number, number]) => {
    const i = (width * y + x) << 2;
    png.data[i] = r;
    png.data[i + 1] = g;
    png.data[i + 2] = b;
    png.data[i + 3] = 255;
  };
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) paint(x, y, [255, 255, 255]);
  const margin = 10;
  const plotH = height - 2 * margin;
  const max = Math.max(0, ...values);
  const slot = values.length > 0 ? (width - 2 * margin) / values.length : 0;
  values.forEach((v, i) => {
    const barH = max > 0 ? Math.round((Math.max(0, v) / max) * plotH) : 0;
    const x0 = Math.round(margin + i * slot + slot * 0.15);
    const x1 = Math.max(x0 + 1, Math.round(margin + (i + 1) * slot - slot * 0.15));
    for (let x = x0; x < x1 && x < width; x++)
      for (let y = height - margin - barH; y < height - margin; y++) paint(x, y, [37, 99, 235]);
  });
  for (let x = margin; x < width - margin; x++) paint(x, height - margin, [100, 100, 100]);
  return PNG.sync.write(png);
}
