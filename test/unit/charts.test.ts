import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartPng, chartSvg } from '../../charts/render.js';

test('a chart renders on the server as SVG with its axis labels and values, and as a PNG', () => {
  const option = {
    xAxis: { type: 'category' as const, data: ['Mon', 'Tue'] },
    yAxis: { type: 'value' as const },
    series: [{ type: 'bar' as const, data: [3, 7], label: { show: true } }],
  };
  const svg = chartSvg(option, { width: 300, height: 150 });
  for (const text of ['Mon', 'Tue', '>3<', '>7<']) assert.ok(svg.includes(text), `${text} in the SVG`);
  const png = chartPng(option, { width: 300, height: 150 });
  assert.deepEqual([...png.subarray(1, 4)], [...Buffer.from('PNG')]);
  assert.equal(png.readUInt32BE(16), 600, 'twice as wide as the chart');
});
