// Window positions on the grid: consecutive windows get consecutive numbers, across DST changes
// and whatever the grid, so "every Nth window" means every Nth.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { windowIndex } from '../../schedules/window-index.js';
import { parseGrid, windowsInRange, type Grid } from '../../schedules/windows.js';

const grid = (text: string): Grid => parseGrid(text) as Grid;

test('consecutive windows have consecutive indices on every grid, across DST', () => {
  for (const [g, zone] of [
    ['day', 'Europe/Berlin'],
    ['day', 'America/Santiago'],
    ['week', 'Australia/Lord_Howe'],
    ['month', 'America/New_York'],
    ['1h', 'UTC'],
    ['15m', 'UTC'],
  ] as const) {
    const windows = windowsInRange(
      grid(g),
      zone,
      new Date('2026-01-01T00:00:00Z'),
      new Date(g === '15m' || g === '1h' ? '2026-01-05T00:00:00Z' : '2027-01-01T00:00:00Z'),
    );
    const indices = windows.map((w) => windowIndex(grid(g), zone, w.start));
    for (let i = 1; i < indices.length; i++)
      assert.equal(indices[i], indices[i - 1]! + 1, `${g} ${zone} #${i}`);
  }
});

test('indices count from the epoch', () => {
  assert.equal(windowIndex(grid('day'), 'UTC', new Date('1970-01-01T00:00:00Z')), 0);
  assert.equal(windowIndex(grid('day'), 'UTC', new Date('2026-10-01T00:00:00Z')), 20727);
  assert.equal(windowIndex(grid('week'), 'UTC', new Date('1970-01-05T00:00:00Z')), 1);
  assert.equal(windowIndex(grid('month'), 'Asia/Tokyo', new Date('1970-01-31T15:00:00Z')), 1);
  assert.equal(windowIndex(grid('1h'), 'UTC', new Date('1970-01-02T00:00:00Z')), 24);
});
