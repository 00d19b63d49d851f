// The docs as a reader meets them: a README short enough to read in five minutes, every link and
// anchor between the pages leading somewhere, every command block either run by a test as written
// or marked with why it cannot be run here, and the package saying what it is and under which licence.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** Every page a reader is sent to: the README, CONTRIBUTING and all of docs/. */
function pages(): string[] {
  const out = ['README.md', 'CONTRIBUTING.md', 'BENCHMARKS.md', 'RELIABILITY.md'];
  const walk = (dir: string) => {
    for (const name of readdirSync(join(ROOT, dir)).sort()) {
      const path = join(dir, name);
      if (statSync(join(ROOT, path)).isDirectory()) walk(path);
      else if (name.endsWith('.md')) out.push(path);
    }
  };
  walk('docs');
  return out;
}

/**
 * Pages whose every command block one test runs as written, block by block; the test names the
 * page and fails when a block of it was not run.
 */
const RUN_WHOLE: Readonly<Record<string, string>> = {
  'docs/tutorial.md': 'test/system/product/tutorial.test.ts',
  'docs/restore.md': 'test/system/product/restore-docs.test.ts',
  'docs/runbook.md': 'test/system/product/runbook.test.ts',
};

const FENCE = /^```([\w-]*)[^\n]*\n[\s\S]*?^```$/gm;
const SHELLS = new Set(['sh', 'bash', 'shell', 'console']);

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, '')
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(text: string): Set<string> {
  const prose = text.replace(FENCE, '');
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const m of prose.matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of prose.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

test('the README reads in five minutes: at most 200 lines, with both quick-start lines and the map of the docs', () => {
  const readme = read('README.md');
  const lines = readme.split('\n').length;
  assert.ok(lines <= 200, `README.md has ${lines} lines; move the detail into docs/`);
  assert.match(readme, /^\. scripts\/node\.sh && npm ci && npm start/m);
  assert.match(readme, /^\. scripts\/node\.sh && npm ci && npm test && npm run test:system/m);
  for (const page of pages().filter((p) => p.startsWith('docs/') && !p.startsWith('docs/images/')))
    assert.ok(
      readme.includes(`](${page})`) || readme.includes(`](${page}#`),
      `README.md's map links ${page}`,
    );
  assert.ok(readme.includes('](CONTRIBUTING.md)'), "README.md's map links CONTRIBUTING.md");
});

test('every relative link and anchor in the docs leads to a file and a heading that exist', () => {
  const broken: string[] = [];
  for (const page of pages()) {
    const text = read(page);
    const prose = text.replace(FENCE, '').replace(/`[^`\n]*`/g, '');
    for (const m of prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const file = path === '' ? page : relative(ROOT, join(ROOT, dirname(page), decodeURI(path)));
      if (!existsSync(join(ROOT, file))) {
        broken.push(`${page}: ${target} (no file ${file})`);
        continue;
      }
      if (anchor && file.endsWith('.md') && !anchorsOf(read(file)).has(anchor))
        broken.push(`${page}: ${target} (${file} has no heading or anchor "${anchor}")`);
    }
  }
  assert.deepEqual(broken, []);
});

test('every command block in the docs is run by a test as written, or says why it is not', () => {
  const unaccounted: string[] = [];
  for (const page of pages()) {
    const text = read(page);
    const whole = RUN_WHOLE[page];
    if (whole) {
      const source = read(whole);
      assert.ok(source.includes(page.replace(/^docs\//, '')), `${whole} reads ${page}`);
      continue;
    }
    for (const m of text.matchAll(FENCE)) {
      if (!SHELLS.has(m[1]!)) continue;
      const before = text.slice(0, m.index).trimEnd();
      const note = /<!--\s*(not run|run by)\b:?\s*([^>]*?)\s*-->$/.exec(before);
      const line = text.slice(0, m.index).split('\n').length;
      if (!note) {
        unaccounted.push(
          `${page}:${line}: a command block with neither <!-- run by <test> --> nor <!-- not run: <why> -->`,
        );
        continue;
      }
      if (note[1] === 'not run') {
        if (note[2]!.length < 10) unaccounted.push(`${page}:${line}: "not run" without a reason`);
        continue;
      }
      const tests = note[2]!.split(/[\s,()]+/).filter((w) => /^(test\/|\.ci\/)/.test(w));
      if (tests.length === 0) unaccounted.push(`${page}:${line}: "run by" names no test file`);
      for (const t of tests)
        if (!existsSync(join(ROOT, t)))
          unaccounted.push(`${page}:${line}: "run by" names ${t}, which does not exist`);
    }
  }
  for (const [page, runner] of Object.entries(RUN_WHOLE)) {
    assert.ok(existsSync(join(ROOT, page)), `${page} exists`);
    assert.ok(existsSync(join(ROOT, runner)), `${runner}, which runs ${page}, exists`);
  }
  assert.deepEqual(unaccounted, []);
});

test('the package names its licence, repository, description and keywords, and ships the licence', () => {
  const pkg = JSON.parse(read('package.json')) as Record<string, unknown>;
  assert.equal(pkg.license, 'MIT');
  assert.match(read('LICENSE'), /^MIT License\n\nCopyright \(c\) \d{4} /);
  assert.ok(typeof pkg.description === 'string' && pkg.description.length > 20);
  assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.includes('temporal'));
  const repo = pkg.repository as { type?: string; url?: string } | undefined;
  assert.equal(repo?.type, 'git');
  assert.match(repo?.url ?? '', /^git\+https:\/\//);
  assert.ok((pkg.files as string[]).includes('LICENSE'), 'the tarball carries LICENSE');
});

test('the evidence pages say how to reproduce them and when they were measured', () => {
  const bench = read('BENCHMARKS.md');
  assert.match(bench, /`npm run bench`/);
  assert.match(bench, /on \d{4}-\d{2}-\d{2}/);
  const rel = read('RELIABILITY.md');
  assert.match(rel, /`npm run chaos`/);
  assert.match(rel, /\d{4}-\d{2}-\d{2}T/);
  assert.match(rel, /Run: `CHAOS_SEED=\d+/);
});
