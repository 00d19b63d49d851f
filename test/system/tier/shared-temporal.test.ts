// The system tier's one Temporal dev server (test/helpers/shared-temporal.ts): two test files run at
// once through the tier's own runner, each under the same workflow and schedule ids, see only their
// own in a namespace of their own, and the run ends with the server stopped.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const markers = mkdtempSync(join(tmpdir(), 'tidemark-shared-temporal-'));
after(() => rmSync(markers, { recursive: true, force: true }));

test('two files on the shared server: each in a namespace of its own, ids reused without a clash', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, SHARED_TEMPORAL_MARKERS: markers };
  // The run starts a shared server of its own, as `npm run test:system` does.
  delete env.TIDEMARK_TEST_TEMPORAL;
  delete env.TEMPORAL_NAMESPACE;
  // The runner of this file marks its children; one so marked refuses to run files of its own.
  delete env.NODE_TEST_CONTEXT;
  const child = spawn(
    'sh',
    [
      'scripts/node-test.sh',
      '--test-global-setup=test/helpers/shared-temporal-setup.mjs',
      'test/fixtures/shared-temporal/one.fixture.ts',
      'test/fixtures/shared-temporal/two.fixture.ts',
    ],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => child.once('close', r));
  assert.equal(code, 0, out);
  assert.match(out, /^# pass 2$/m, out);
  const one = readFileSync(join(markers, 'one'), 'utf8');
  const two = readFileSync(join(markers, 'two'), 'utf8');
  // Each namespace is named after its file, and told apart by a random suffix.
  assert.match(one, /^one-/);
  assert.match(two, /^two-/);
});
