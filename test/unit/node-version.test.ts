// The Node.js tidemark runs on: one floor (package.json engines) that the Dockerfile, the README,
// @types/node and scripts/node.sh agree with, and a check that stops an older Node.js at once,
// naming the version needed and how to get it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
// @ts-expect-error plain JavaScript without declarations (it must parse on any Node.js)
import { engineFloor, nodeVersionProblem } from '../../bin/node-check.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string) => readFileSync(join(root, file), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
  files: string[];
};
const floor = engineFloor(pkg.engines.node) as [number, number, number];

test('an older Node.js is refused, naming the version needed, the one running and how to get it', () => {
  const problem = nodeVersionProblem('20.20.2', '>=22.12.0', { inSource: true, execPath: '/usr/bin/node' });
  assert.match(problem, /needs Node\.js 22\.12\.0 or newer/);
  assert.match(problem, /this is Node\.js 20\.20\.2 \(\/usr\/bin\/node\)/);
  assert.match(problem, /\. scripts\/node\.sh/);
  const installed = nodeVersionProblem('22.11.0', '>=22.12.0', { inSource: false });
  assert.match(installed, /needs Node\.js 22\.12\.0 or newer; this is Node\.js 22\.11\.0/);
  assert.match(installed, /Install Node\.js 24 LTS/);
  assert.doesNotMatch(installed, /scripts\/node\.sh/, 'a package user has no scripts/node.sh');
  for (const old of ['v20.10.0', '21.99.99', '22.0.0', '22.11.99', '18.20.8', '22.12.0-rc.1', '22.12.0-pre'])
    assert.ok(nodeVersionProblem(old, '>=22.12.0'), `${old} is refused`);
  for (const ok of [
    '22.12.0',
    'v22.12.0',
    '22.12.1',
    '22.13.0-rc.1',
    '22.20.0',
    '23.0.0',
    '24.19.0',
    '25.1.0',
  ])
    assert.equal(nodeVersionProblem(ok, '>=22.12.0'), null, `${ok} is accepted`);
});

test('an engines range the check cannot read is an error, not a pass', () => {
  assert.throws(() => engineFloor('^22.12.0'), /engines\.node must read ">=X\.Y\.Z", not "\^22\.12\.0"/);
  assert.throws(() => engineFloor('>=22'), /must read/);
  assert.deepEqual(engineFloor('>=22.12.0'), [22, 12, 0]);
});

test('the tidemark command and the npm scripts stop at once on a Node.js below engines', () => {
  // A copy of bin/ beside a package.json whose floor no Node.js reaches: the check fires before
  // the command loads anything else (there is no dist/ or cli/ here to load).
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-node-check-'));
  try {
    mkdirSync(join(dir, 'bin'));
    for (const file of ['tidemark.js', 'node-check.js'])
      copyFileSync(join(root, 'bin', file), join(dir, 'bin', file));
    writeFileSync(
      join(dir, 'package.json'),
      JSON.stringify({ type: 'module', engines: { node: '>=999.0.0' } }),
    );
    for (const script of ['bin/tidemark.js', 'bin/node-check.js']) {
      const r = spawnSync(process.execPath, [join(dir, script), 'jobs'], { encoding: 'utf8' });
      assert.equal(r.status, 1, `${script}: ${r.stderr}`);
      assert.match(
        r.stderr,
        new RegExp(`needs Node\\.js 999\\.0\\.0 or newer; this is Node\\.js ${process.versions.node}`),
      );
      assert.match(
        r.stderr,
        /Install Node\.js 24 LTS/,
        'no scripts/node.sh beside it: the package user is told',
      );
      assert.doesNotMatch(r.stderr, /ERR_MODULE_NOT_FOUND|at /, 'the message alone, no stack');
    }
    const ok = spawnSync(process.execPath, [join(root, 'bin/node-check.js')], { encoding: 'utf8' });
    assert.equal(
      ok.status,
      0,
      `this Node.js (${process.versions.node}) passes the repository's own check: ${ok.stderr}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;
  // Inline, not in pre-scripts alone: npm skips pre-scripts under ignore-scripts.
  for (const name of ['start', 'test', 'test:system', 'test:smoke'])
    assert.match(scripts[name]!, /^node bin\/node-check\.js && /, `npm run ${name} checks first`);
  assert.ok(pkg.files.includes('bin/node-check.js'), 'the package carries the check its command runs');
});

test('engines, @types/node, the Dockerfile, scripts/node.sh and the README name one Node.js', () => {
  assert.ok(floor[0] >= 22, `engines floor ${floor.join('.')} is a supported line`);
  const types = pkg.devDependencies['@types/node']!;
  assert.equal(
    Number(types.split('.')[0]),
    floor[0],
    `@types/node ${types} is of the floor's line (${floor[0]})`,
  );

  const nodeSh = read('scripts/node.sh');
  const lines = Object.fromEntries(
    [...nodeSh.matchAll(/^\s*(\d+)\) version=(\d+\.\d+\.\d+) ;;$/gm)].map((m) => [m[1], m[2]!]),
  );
  assert.deepEqual(Object.keys(lines).sort(), ['22', '24']);
  assert.match(nodeSh, /\$\{TIDEMARK_NODE:-24\}/, 'Node.js 24 is the default');
  for (const version of Object.values(lines))
    assert.equal(
      nodeVersionProblem(version, pkg.engines.node),
      null,
      `scripts/node.sh's ${version} meets engines`,
    );

  const froms = [...read('Dockerfile').matchAll(/^FROM (\S+)/gm)].map((m) => m[1]!);
  assert.ok(froms.length >= 1);
  for (const image of froms) assert.match(image, /^node:24-[a-z]+-slim$/, `${image}: the current LTS, slim`);

  const readme = read('README.md');
  const floorText = floor[2] === 0 ? `${floor[0]}\\.${floor[1]}(\\.0)?` : floor.join('\\.');
  assert.ok(new RegExp(`Node\\.js ${floorText} or newer`).test(readme), 'the README names the floor');
  assert.ok(
    /\. scripts\/node\.sh && npm ci && npm test/.test(readme),
    'the README says how to get the Node.js the tests use',
  );
  assert.ok(!/Node\.js 20\+|node:20/.test(readme), 'no word of Node.js 20 as supported');
});
