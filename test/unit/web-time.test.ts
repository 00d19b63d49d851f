// How the web pages word instants: the distance from now, coarse, and "just now" for the present.
import assert from 'node:assert/strict';
import { test } from 'node:test';

// The page's own module, as the browser loads it (plain JavaScript, no declarations).
const { ago } = (await import('../../web/public/time.js' as string)) as {
  ago: (iso: string, now?: number) => string;
};

const NOW = Date.parse('2026-12-05T10:00:00Z');
const at = (offsetMs: number) => new Date(NOW + offsetMs).toISOString();

test('an instant within a second of now is "just now", never "in 0 s" or "0 s ago"', () => {
  for (const ms of [0, 400, -400]) assert.equal(ago(at(ms), NOW), 'just now');
});

test('past and future instants are worded coarsely by their distance', () => {
  assert.equal(ago(at(-5_000), NOW), '5 s ago');
  assert.equal(ago(at(7_000), NOW), 'in 7 s');
  assert.equal(ago(at(-3 * 60_000), NOW), '3 min ago');
  assert.equal(ago(at(2 * 3_600_000), NOW), 'in 2 h');
  assert.equal(ago(at(-3 * 86_400_000), NOW), '3 d ago');
});
