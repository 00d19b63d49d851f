// `tidemark web` as a process of its own: the page of the catalog that --catalog names, served
// against the real Temporal server and PostgreSQL, stopped by SIGTERM with exit code 0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { freePort } from '../../helpers/net.js';
import { eventually, realStack } from '../../helpers/temporal.js';

const stack = realStack();
const bin = fileURLToPath(new URL('../../../bin/tidemark.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tidemark-web-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('tidemark web --catalog serves that catalog on TIDEMARK_WEB_HOST until SIGTERM', async (t) => {
  const job = pathToFileURL(fileURLToPath(new URL('../../../schedules/define.ts', import.meta.url))).href;
  const catalog = join(dir, 'catalog.ts');
  writeFileSync(
    catalog,
    `import { defineCatalog } from '${job}';\n` +
      "export default defineCatalog([{ name: 'web-only', grid: '1h', handler: async () => ({ input: 0, applied: 0, quarantined: 0 }) }]);\n",
  );
  const port = await freePort();
  const token = 'web-entry-token-1234';
  const web = spawn(process.execPath, [bin, 'web', '--catalog', catalog], {
    env: {
      ...process.env,
      DATABASE_URL: stack.t.url,
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
      TIDEMARK_WEB_PORT: String(port),
      TIDEMARK_WEB_TOKEN: token,
      // Another loopback address: the page listens where it is told (0.0.0.0 in a container), only there.
      TIDEMARK_WEB_HOST: '127.0.0.2',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  web.stdout.on('data', (d) => (output += d));
  web.stderr.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((r) => web.once('exit', (code) => r(code)));
  t.after(async () => {
    if (web.exitCode === null) web.kill('SIGTERM');
    await exited;
  });
  await eventually(
    async () => (output.includes('[web] http') ? true : undefined),
    60_000,
    `the page:\n${output}`,
  );

  assert.match(output, new RegExp(`\\[web\\] http://127\\.0\\.0\\.2:${port}`));
  const res = await fetch(`http://127.0.0.2:${port}/api/state`, {
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(res.status, 200);
  await assert.rejects(fetch(`http://127.0.0.1:${port}/api/state`), /fetch failed/);
  const state = (await res.json()) as { jobs: { job: string }[] };
  assert.deepEqual(
    state.jobs.map((j) => j.job),
    ['web-only', 'tidemark-housekeeping'],
  );
  web.kill('SIGTERM');
  assert.equal(await exited, 0, output);
});

test('tidemark web without TIDEMARK_WEB_TOKEN is refused, naming the variable', async () => {
  const web = spawn(process.execPath, [bin, 'web'], {
    env: { ...process.env, DATABASE_URL: stack.t.url, TIDEMARK_WEB_TOKEN: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  web.stderr.on('data', (d) => (output += d));
  const code = await new Promise<number | null>((r) => web.once('exit', (c) => r(c)));
  assert.equal(code, 2);
  assert.match(output, /TIDEMARK_WEB_TOKEN/);
});
