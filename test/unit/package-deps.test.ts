// Everything the package ships imports only its dependencies: a devDependency imported by shipped
// code works in the repository and fails for a user (`tidemark dev` once needed smtp-server).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};
const build = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8')) as { include: string[] };

function sources(path: string): string[] {
  const full = join(root, path);
  if (!statSync(full).isDirectory()) return path.endsWith('.ts') ? [path] : [];
  return readdirSync(full).flatMap((f) => sources(join(path, f)));
}

/** The package a bare specifier names: `@scope/name` or `name`, without a subpath. */
const packageOf = (spec: string) =>
  spec
    .split('/')
    .slice(0, spec.startsWith('@') ? 2 : 1)
    .join('/');

test('shipped code imports only node built-ins and the dependencies', () => {
  const files = build.include.flatMap(sources);
  assert.ok(files.length > 100, `only ${files.length} files found`);
  const wrong: string[] = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const m of text.matchAll(
      /(?:^import[^'"]*?from |^export[^'"]*? from |import\()\s*'([^'.][^']*)'/gms,
    )) {
      const spec = m[1]!;
      if (/^import type |^export type /.test(m[0])) continue;
      if (spec.startsWith('node:') || builtinModules.includes(spec)) continue;
      if (!(packageOf(spec) in pkg.dependencies)) wrong.push(`${file}: ${spec}`);
    }
  }
  assert.deepEqual(wrong, []);
});
