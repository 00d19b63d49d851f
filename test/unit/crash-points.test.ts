// Crash points are test seams: named once, reached through the injected deps, never installed
// by the production wiring.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Kysely } from 'kysely';
import { beginPointOf, CRASH_POINT, reached, type CrashPoint } from '../../activities/crash-points.js';
import type { ActivityDeps } from '../../activities/deps.js';
import { memoryLogger } from '../../activities/logger.js';
import { loadConfig } from '../../config/env.js';
import type { Database } from '../../db/schema.js';
import { defineCatalog } from '../../schedules/define.js';
import { buildDeps } from '../../workers/deps.js';

test('crash points: a frozen map of names, each its own key', () => {
  assert.ok(Object.isFrozen(CRASH_POINT));
  for (const [k, v] of Object.entries(CRASH_POINT)) assert.equal(k, v);
  for (const name of [
    'beforeClaim',
    'inHandler',
    'afterCommit',
    'afterBegin',
    'afterProvider',
    'inAlertDelivery',
  ])
    assert.ok(name in CRASH_POINT, name);
});

test('production wiring installs no crash-point hook, whatever the environment says', () => {
  const deps = buildDeps(loadConfig({ TIDEMARK_CRASH_AT: 'afterCommit' }), {
    db: {} as Kysely<Database>,
    catalog: defineCatalog([]),
    logger: memoryLogger(),
  });
  assert.equal(deps.hooks, undefined);
});

test('reached: nothing without a hook; the point and key with one', async () => {
  const base = {
    db: {} as Kysely<Database>,
    catalog: defineCatalog([]),
    logger: memoryLogger(),
    now: () => new Date(),
  };
  await reached(base as ActivityDeps, CRASH_POINT.afterCommit, 'k');
  const seen: [CrashPoint, string][] = [];
  await reached(
    { ...base, hooks: { crashPoint: (p, k) => void seen.push([p, k]) } } as ActivityDeps,
    CRASH_POINT.afterCommit,
    'job/2026-01-01T00:00:00Z',
  );
  assert.deepEqual(seen, [['afterCommit', 'job/2026-01-01T00:00:00Z']]);
});

test("an effect's begin point: alert deliveries have their own", () => {
  assert.equal(beginPointOf('alert:4:opened:telegram:ops-chat'), CRASH_POINT.inAlertDelivery);
  assert.equal(beginPointOf('job/2026-01-01T00:00:00Z:report'), CRASH_POINT.afterBegin);
});
