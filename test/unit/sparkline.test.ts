import assert from 'node:assert/strict';
import { test } from 'node:test';
import { durationsSparklineSvg } from '../../charts/sparkline.js';

test('a job with a single run shows that run as a dot (a line needs two points)', () => {
  const svg = durationsSparklineSvg('one', [
    {
      durationMs: 120,
      outcome: 'processed',
      finishedAt: '2026-12-01T00:00:00Z',
      window: null,
      generation: 0,
    },
  ]);
  assert.match(svg, /fill="#3b82f6"/, 'a blue dot where the lone run is');
});
