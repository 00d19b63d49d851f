// Where the catalog comes from: --catalog > TIDEMARK_CATALOG > tidemark.config.* in the working
// directory > the demo catalog; a module's default or `catalog` export, a Catalog or a function
// of the config; every problem named with the file.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { CatalogSourceError, catalogPath, isFallbackDemo, loadCatalog } from '../../config/catalog-source.js';
import { loadConfig } from '../../config/env.js';
import { run } from '../../cli/main.js';
import { HOUSEKEEPING_JOB } from '../../jobs/housekeeping/index.js';

const dir = mkdtempSync(join(tmpdir(), 'tidemark-catalog-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const config = loadConfig({});
const jobModule = pathToFileURL(join(process.cwd(), 'schedules/define.ts')).href;

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const oneJob = (name: string) =>
  `{ name: '${name}', grid: '1h', handler: async () => ({ input: 0, applied: 0, quarantined: 0 }) }`;

describe('catalogPath: which module names the catalog', () => {
  const cwd = mkdtempSync(join(dir, 'cwd-'));
  test('--catalog wins over TIDEMARK_CATALOG, which wins over the working directory', () => {
    writeFileSync(join(cwd, 'tidemark.config.js'), '');
    assert.equal(catalogPath({ flag: 'a.js', env: 'b.js', cwd }), join(cwd, 'a.js'));
    assert.equal(catalogPath({ env: 'b.js', cwd }), join(cwd, 'b.js'));
    assert.equal(catalogPath({ cwd }), join(cwd, 'tidemark.config.js'));
  });
  test('tidemark.config.js, then .mjs, then .ts; none: the demo catalog', () => {
    const empty = mkdtempSync(join(dir, 'empty-'));
    assert.equal(catalogPath({ cwd: empty }), undefined);
    writeFileSync(join(empty, 'tidemark.config.ts'), '');
    assert.equal(catalogPath({ cwd: empty }), join(empty, 'tidemark.config.ts'));
    writeFileSync(join(empty, 'tidemark.config.mjs'), '');
    assert.equal(catalogPath({ cwd: empty }), join(empty, 'tidemark.config.mjs'));
  });
});

describe('loadCatalog', () => {
  test('no module named: the demo catalog', async () => {
    const catalog = await loadCatalog(config, { cwd: mkdtempSync(join(dir, 'none-')) });
    assert.ok(catalog.has('sales-hourly'));
  });

  test('a default export that is a Catalog', async () => {
    const path = file(
      'default.mjs',
      `import { defineCatalog } from '${jobModule}';\nexport default defineCatalog([${oneJob('mine')}]);\n`,
    );
    const catalog = await loadCatalog(config, { flag: path });
    assert.deepEqual(
      catalog.jobs.map((j) => j.name),
      ['mine', HOUSEKEEPING_JOB],
    );
  });

  test('a named `catalog` export that is a function of the config, with plain job specs', async () => {
    const path = file(
      'named.mjs',
      `export const catalog = (config) => [{ ...${oneJob('x')}, name: 'from-' + config.TIDEMARK_TASK_QUEUE }];\n`,
    );
    const catalog = await loadCatalog(config, { env: path });
    assert.deepEqual(
      catalog.jobs.map((j) => j.name),
      ['from-tidemark', HOUSEKEEPING_JOB],
    );
  });

  test("the built-in housekeeping job joins a module's catalog unless TIDEMARK_HOUSEKEEPING=off", async () => {
    const path = file('off.mjs', `export default [${oneJob('plain')}];\n`);
    const off = await loadCatalog(loadConfig({ TIDEMARK_HOUSEKEEPING: 'off' }), { flag: path });
    assert.deepEqual(
      off.jobs.map((j) => j.name),
      ['plain'],
    );
    const on = await loadCatalog(config, { flag: path });
    assert.equal(on.get(HOUSEKEEPING_JOB).grid.label, 'day');
  });

  test('a .ts module is loaded through tsx', async () => {
    const path = file(
      'typed.ts',
      `const n: string = 'typed';\nexport default [{ ...${oneJob('x')}, name: n }];\n`,
    );
    const catalog = await loadCatalog(config, { flag: path });
    assert.deepEqual(
      catalog.jobs.map((j) => j.name),
      ['typed', HOUSEKEEPING_JOB],
    );
  });

  async function refused(opts: Parameters<typeof loadCatalog>[1], ...fragments: RegExp[]) {
    await assert.rejects(loadCatalog(config, opts), (err: unknown) => {
      assert.ok(err instanceof CatalogSourceError, String(err));
      for (const f of fragments) assert.match(err.message, f);
      return true;
    });
  }

  test('a missing file is named, with where the name came from', async () => {
    await refused({ env: join(dir, 'nope.js') }, /nope\.js/, /TIDEMARK_CATALOG/, /does not exist/);
    await refused({ flag: join(dir, 'nope.js') }, /--catalog/);
  });

  test('a module without a catalog export says which exports it has', async () => {
    await refused({ flag: file('none.mjs', 'export const jobs = [];\n') }, /none\.mjs/, /default/, /jobs/);
  });

  test('an export that is not a catalog is refused by name', async () => {
    await refused({ flag: file('number.mjs', 'export default 42;\n') }, /number\.mjs/, /number/);
  });

  test('an invalid job names the file, the job and the field', async () => {
    const path = file('bad.mjs', `export default [{ ...${oneJob('bad-job')}, grid: '7q' }];\n`);
    await refused({ flag: path }, /bad\.mjs/, /bad-job/, /grid/);
  });

  test('a directory named as the catalog is refused with the module to name instead', async () => {
    const folder = mkdtempSync(join(dir, 'folder-'));
    writeFileSync(join(folder, 'tidemark.config.js'), '');
    await refused({ env: folder }, /is a directory/, new RegExp(join(folder, 'tidemark.config.js')));
  });

  test('a module that throws on import is named', async () => {
    await refused({ flag: file('throws.mjs', "throw new Error('boom');\n") }, /throws\.mjs/, /boom/);
  });
});

describe('the demo catalog is never a silent stand-in for yours', () => {
  test('falling back to the demo catalog is said, with where tidemark looked', async () => {
    const cwd = mkdtempSync(join(dir, 'nothing-'));
    const said: string[] = [];
    const catalog = await loadCatalog(config, {
      cwd,
      env: undefined,
      flag: undefined,
      warn: (l) => said.push(l),
    });
    assert.ok(catalog.has('sales-hourly'));
    assert.equal(said.length, 1, said.join('\n'));
    assert.match(said[0]!, /demo catalog/);
    assert.ok(said[0]!.includes(cwd), said[0]);
    assert.match(said[0]!, /TIDEMARK_CATALOG/);
  });

  test('a tidemark.config file with another extension is refused, not replaced by the demo', async () => {
    const cwd = mkdtempSync(join(dir, 'misnamed-'));
    writeFileSync(join(cwd, 'tidemark.config.cjs'), `module.exports = [${oneJob('mine')}];\n`);
    await assert.rejects(
      loadCatalog(config, { cwd, env: undefined, flag: undefined, warn: () => undefined }),
      (err: Error) =>
        err instanceof CatalogSourceError &&
        /tidemark\.config\.cjs/.test(err.message) &&
        /tidemark\.config\.js/.test(err.message),
    );
  });
});

describe('the CLI names the catalog it could not use', () => {
  async function cli(...argv: string[]): Promise<{ code: number; err: string }> {
    const err: string[] = [];
    const code = await run(argv, { out: () => undefined, err: (l) => err.push(l), json: false, tty: false });
    return { code, err: err.join('\n') };
  }

  test('--catalog with an invalid job: usage exit, the file, job and field named', async () => {
    const path = file('cli-bad.mjs', `export default [{ ...${oneJob('cli-bad')}, grid: '7q' }];\n`);
    const { code, err } = await cli('jobs', '--catalog', path);
    assert.equal(code, 2);
    assert.match(err, /cli-bad\.mjs/);
    assert.match(err, /cli-bad/);
    assert.match(err, /grid/);
  });

  test('--catalog=<path> of a long-running command too, before it connects to anything', async () => {
    const { code, err } = await cli('worker', `--catalog=${join(dir, 'missing.js')}`);
    assert.equal(code, 2);
    assert.match(err, /missing\.js: does not exist \(named by --catalog\)/);
  });

  test('--catalog without a path is a usage error', async () => {
    assert.equal((await cli('jobs', '--catalog')).code, 2);
  });
});

test('tidemark dev (demoByDefault) and TIDEMARK_CATALOG=demo run the demo on purpose: not said, not a fallback; nothing named is one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tidemark-demo-'));
  try {
    const warned: string[] = [];
    const opts = { cwd: dir, env: undefined, flag: undefined, warn: (l: string) => warned.push(l) };
    const dev = await loadCatalog(loadConfig({}), { ...opts, demoByDefault: true });
    const named = await loadCatalog(loadConfig({}), { ...opts, env: 'demo' });
    assert.deepEqual(warned, []);
    assert.equal(isFallbackDemo(dev) || isFallbackDemo(named), false);
    const fallback = await loadCatalog(loadConfig({}), opts);
    assert.equal(warned.length, 1);
    assert.equal(isFallbackDemo(fallback), true);
    assert.deepEqual(
      fallback.jobs.map((j) => j.name),
      dev.jobs.map((j) => j.name),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
