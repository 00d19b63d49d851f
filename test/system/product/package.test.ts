// The npm package, as a user gets it: `npm pack` (which builds dist/), the tarball installed into a
// fresh npm project outside the repository, a tidemark.config.js there with a job of its own, and
// the installed `tidemark` command run against a real Temporal server and PostgreSQL: schedule
// sync, a worker processing one window, and `tidemark jobs` listing the job. tsx is removed from
// the installed project first, so a .js catalog is shown to run on node alone.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sql } from 'kysely';
import { freePort } from '../../helpers/net.js';
import { packedTarball } from '../../helpers/pack.js';
import { eventually, realStack, uniqueQueue } from '../../helpers/temporal.js';

const run = promisify(execFile);
const repo = fileURLToPath(new URL('../../..', import.meta.url));
const stack = realStack();
const work = mkdtempSync(join(tmpdir(), 'tidemark-package-'));
after(() => rmSync(work, { recursive: true, force: true }));

const CATALOG = `// A user's catalog: one job of its own, written against the package's public entry.
import { defineCatalog, defineJob, sql } from 'tidemark';

const ticks = defineJob({
  name: 'my-ticks',
  description: 'one row per hour into public.my_ticks',
  grid: '1h',
  lateness: '1m',
  // Yearly: the test's backfill alone writes the table (an hourly tick at +1m would add a row).
  tick: { cron: '0 0 1 1 *' },
  handler: async ({ trx, window, key }) => {
    await sql\`insert into public.my_ticks (window_key, window_start) values (\${key}, \${window.start})\`.execute(trx);
    return { input: 1, applied: 1, quarantined: 0 };
  },
});

export default defineCatalog([ticks]);
`;

// npm pack compiles the whole project (it took 227 s on 2 cores beside other CPU-bound work),
// then npm installs the tarball: together more than the runner's 300 s default per test.
test(
  'the packed package, installed elsewhere, runs a catalog of its own end to end',
  { timeout: 900_000 },
  async (t) => {
    const started = Date.now();
    const { tarball, files } = await packedTarball();
    t.diagnostic(`npm pack (build included, or this run's tarball): ${Date.now() - started} ms`);

    const project = join(work, 'my-jobs');
    assert.ok(relative(repo, project).startsWith('..'), 'the project lies outside the repository');
    rmSync(project, { recursive: true, force: true });
    await run('mkdir', ['-p', project]);
    const npm = (args: string[]) => run('npm', args, { cwd: project, maxBuffer: 64 * 1024 * 1024 });
    await npm(['init', '-y']);
    await npm(['pkg', 'set', 'type=module']);
    const installing = Date.now();
    await npm(['install', tarball, '--prefer-offline', '--no-audit', '--no-fund']);
    t.diagnostic(`npm install of the tarball: ${Date.now() - installing} ms`);
    // The package carries its lock as npm-shrinkwrap.json: a user (and the Docker image) gets the
    // versions the tests ran with, not whatever the ranges resolve to that day.
    assert.ok(files.includes('npm-shrinkwrap.json'), 'the tarball holds npm-shrinkwrap.json');
    // The workflow bundles built with the package: its workers load one instead of running webpack.
    for (const bundle of ['plain.js', 'encrypted.js'])
      assert.ok(files.includes(`dist/workflow-bundles/${bundle}`), `the tarball holds the ${bundle} bundle`);
    for (const asset of ['index.html', 'app.js', 'app.css', 'dom.js'])
      assert.ok(files.includes(`dist/web/public/${asset}`), `the tarball holds the page's ${asset}`);
    const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean }>;
    };
    const installedVersion = (name: string) =>
      [join(project, 'node_modules', 'tidemark', 'node_modules', name), join(project, 'node_modules', name)]
        .map((dir) => join(dir, 'package.json'))
        .filter((f) => existsSync(f))
        .map((f) => (JSON.parse(readFileSync(f, 'utf8')) as { version: string }).version)[0];
    for (const name of ['pg-protocol', 'pg-pool', '@temporalio/core-bridge', 'pino-std-serializers'])
      assert.equal(installedVersion(name), lock.packages[`node_modules/${name}`]?.version, name);
    rmSync(join(project, 'node_modules', 'tsx'), { recursive: true, force: true });
    writeFileSync(join(project, 'tidemark.config.js'), CATALOG);

    // A catalog in TypeScript type-checks against the package's declarations (and the @types/node
    // the install brought) without skipLibCheck, its handler's trx typed with the author's tables.
    writeFileSync(
      join(project, 'typed.ts'),
      `import { defineCatalog, defineJob, runWindowOnce } from 'tidemark';
import type { Generated } from 'kysely';
interface ShopDb { my_ticks: { window_key: string; window_start: Date; id: Generated<number> } }
export const catalog = defineCatalog([
  defineJob<ShopDb>({
    name: 'typed-ticks',
    grid: '1h',
    handler: async ({ trx, window, key, signal }) => {
      signal.throwIfAborted();
      await trx.insertInto('my_ticks').values({ window_key: key, window_start: window.start }).execute();
      return { input: 1, applied: 1, quarantined: 0 };
    },
  }),
]);
export const check = () => runWindowOnce({ databaseUrl: 'postgres://x', catalog, job: 'typed-ticks', start: new Date() });
`,
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
        },
        include: ['typed.ts'],
      }),
    );
    const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
    await run(process.execPath, [tsc, '-p', project], { cwd: project }).catch(
      (err: { stdout?: string; stderr?: string }) => {
        throw new Error(`tsc on a TypeScript catalog failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      },
    );

    const { db, url } = stack.t;
    await sql`create table public.my_ticks (window_key text primary key, window_start timestamptz not null)`.execute(
      db,
    );
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: url,
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: uniqueQueue('package'),
      TIDEMARK_STATE_DIR: join(project, '.tidemark'),
    };
    const bin = join(project, 'node_modules', '.bin', 'tidemark');
    const tidemark = (...args: string[]) =>
      run(process.execPath, [bin, ...args], { cwd: project, env }).catch(
        (err: { stdout?: string; stderr?: string }) => {
          throw new Error(`tidemark ${args.join(' ')} failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
        },
      );

    const synced = await tidemark('sync', '--json');
    const plan = JSON.parse(synced.stdout) as { create: string[] };
    assert.ok(plan.create.includes('tidemark:my-ticks'), synced.stdout);

    // Untraced, a worker loads the workflow bundle built with the package (no webpack at its start).
    const plain = spawn(process.execPath, [bin, 'worker'], {
      cwd: project,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let plainOutput = '';
    plain.stdout.on('data', (d) => (plainOutput += d));
    plain.stderr.on('data', (d) => (plainOutput += d));
    const plainExited = new Promise<number | null>((r) => plain.once('exit', (code) => r(code)));
    try {
      await eventually(
        async () => (/polling task queue/.test(plainOutput) ? true : undefined),
        120_000,
        `the untraced worker:\n${plainOutput}`,
      );
      assert.match(
        plainOutput,
        /workflow code \S*\/dist\/workflow-bundles\/plain\.js \(built with the package\)/,
      );
    } finally {
      plain.kill('SIGTERM');
      await plainExited;
    }

    // Traced, so that its bundle takes in the package's workflow tracing module too (spans to stdout).
    const worker = spawn(process.execPath, [bin, 'worker'], {
      cwd: project,
      env: { ...env, OTEL_TRACES_EXPORTER: 'console' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    worker.stdout.on('data', (d) => (output += d));
    worker.stderr.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((r) => worker.once('exit', (code) => r(code)));
    t.after(async () => {
      if (worker.exitCode === null) worker.kill('SIGTERM');
      await exited;
    });
    await eventually(
      async () => (/polling task queue/.test(output) ? true : undefined),
      120_000,
      `the worker:\n${output}`,
    );
    assert.match(output, /jobs: my-ticks\b/);
    assert.match(output, /workflow code bundled at start \(tracing is on\)/);

    const hour = 3_600_000;
    const to = new Date(Math.floor(Date.now() / hour) * hour - hour);
    const from = new Date(to.getTime() - hour);
    await tidemark('backfill', 'my-ticks', '--from', from.toISOString(), '--to', to.toISOString());
    const rows = await sql<{ window_key: string; window_start: Date }>`select * from public.my_ticks`.execute(
      db,
    );
    assert.deepEqual(
      rows.rows.map((r) => [r.window_key, r.window_start.toISOString()]),
      [[`my-ticks/${from.toISOString().replace('.000Z', 'Z')}`, from.toISOString()]],
    );

    const jobs = JSON.parse((await tidemark('jobs', '--json')).stdout) as {
      job: string;
      scheduled: boolean;
      lastRun: { window: string; outcome: string } | null;
    }[];
    assert.deepEqual(
      // Housekeeping's own schedule (daily at 03:17 UTC) may have run it meanwhile: its last run is not compared.
      jobs.map((j) =>
        j.job === 'tidemark-housekeeping'
          ? [j.job, j.scheduled]
          : [j.job, j.scheduled, j.lastRun?.window, j.lastRun?.outcome],
      ),
      [
        ['my-ticks', true, from.toISOString().replace('.000Z', 'Z'), 'processed'],
        // The built-in housekeeping job joins every catalog (docs/guides/housekeeping.md).
        ['tidemark-housekeeping', true],
      ],
    );

    // The installed package serves its page: the static files resolve next to dist/web/server.js.
    const port = await freePort();
    const web = spawn(process.execPath, [bin, 'web'], {
      cwd: project,
      env: { ...env, TIDEMARK_WEB_PORT: String(port), TIDEMARK_WEB_TOKEN: 'package-web-token-1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let webOut = '';
    web.stdout.on('data', (d) => (webOut += d));
    web.stderr.on('data', (d) => (webOut += d));
    const webExited = new Promise<number | null>((r) => web.once('exit', (code) => r(code)));
    t.after(async () => {
      if (web.exitCode === null) web.kill('SIGTERM');
      await webExited;
    });
    await eventually(
      async () => (webOut.includes('[web] http') ? true : undefined),
      60_000,
      `the page:\n${webOut}`,
    );
    const page = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<meta name="csrf"/);
    const script = await fetch(`http://127.0.0.1:${port}/app.js`);
    assert.equal(script.status, 200, webOut);
    assert.match(script.headers.get('content-type') ?? '', /javascript/);
    web.kill('SIGTERM');
    assert.equal(await webExited, 0, webOut);

    worker.kill('SIGTERM');
    assert.equal(await exited, 0, output);
  },
);
