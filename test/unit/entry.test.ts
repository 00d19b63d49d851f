// An entry point started from a path with a space (a checkout under "My Projects") still runs:
// before, `file://${argv[1]}` never equalled the module's URL (a space is %20 there), so
// `npm run worker` exited 0 having done nothing.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';

test('the worker entry point run from a path with a space still runs (and says what is wrong)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark entry '));
  const repo = join(dir, 'my checkout');
  symlinkSync(resolve('.'), repo);
  try {
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(repo, 'workers', 'worker.ts')], {
      cwd: repo,
      env: { ...process.env, TIDEMARK_LOG_LEVEL: 'verbose' },
      encoding: 'utf8',
      // A guard against a hang, not a measure: tsx compiles the worker first, slow beside other work.
      timeout: 240_000,
    });
    assert.equal(r.status, 1, `exit status (stdout: ${r.stdout}, stderr: ${r.stderr})`);
    assert.match(r.stdout, /TIDEMARK_LOG_LEVEL/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
