// The tests choose their own Temporal server, namespace and credentials: a developer's own profile
// (~/.config/temporalio/temporal.toml, which `temporal config set` writes) must not change them. It did:
// its namespace, its TLS and its API key were used by every test process and child that reads the
// environment, and the developer's cloud key was sent to the tests' dev servers.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';

const root = fileURLToPath(new URL('../..', import.meta.url));
const home = mkdtempSync(join(tmpdir(), 'tidemark-fake-home-'));
after(() => rmSync(home, { recursive: true, force: true }));

test("a developer's ~/.config/temporalio/temporal.toml does not reach the tests (in the test process and its children)", () => {
  mkdirSync(join(home, '.config', 'temporalio'), { recursive: true });
  writeFileSync(
    join(home, '.config', 'temporalio', 'temporal.toml'),
    '[profile.default]\nnamespace = "developer-prod"\napi_key = "developer-cloud-key-0123456789"\n',
  );
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => k !== 'XDG_CONFIG_HOME' && !k.startsWith('TEMPORAL_')),
  );
  // What a test sees once it has imported the helpers: in process, and in a child it spawns.
  const script = `
    for (const helper of ['./test/helpers/db.ts', './test/helpers/temporal.ts', './test/helpers/spawn.ts']) await import(helper);
    const { loadConfig } = await import('./config/env.ts');
    const pick = (c) => ({ namespace: c.TEMPORAL_NAMESPACE, tls: c.temporal.tls, apiKey: c.temporal.apiKey, file: c.temporal.file ?? null });
    const inProcess = pick(loadConfig({ ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:7233' }));
    const { execFileSync } = await import('node:child_process');
    const child = JSON.parse(execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e',
      "const { loadConfig } = await import('./config/env.ts'); const c = loadConfig({ ...process.env, TEMPORAL_ADDRESS: '127.0.0.1:7233' }); console.log(JSON.stringify({ namespace: c.TEMPORAL_NAMESPACE, tls: c.temporal.tls, apiKey: c.temporal.apiKey, file: c.temporal.file ?? null }))"],
      { cwd: process.cwd(), encoding: 'utf8' }));
    console.log(JSON.stringify({ inProcess, child }));
    process.exit(0);
  `;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: root,
    env: { ...env, HOME: home },
    encoding: 'utf8',
  });
  const seen = JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>;
  const clean = { namespace: 'default', tls: 'off', apiKey: false, file: null };
  assert.deepEqual(seen, { inProcess: clean, child: clean });
});
