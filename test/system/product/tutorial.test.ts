// docs/tutorial.md run as written, from an empty folder: its ```sh blocks go to bash one after the
// other (a terminal: the directory one block moves to is where the next starts), its ```js blocks
// are saved under the name on their first line, and the two blocks that keep running (the hook,
// `tidemark dev`) run beside the rest, as in the terminals the page opens. The test supplies the
// values of the page's exports (its package tarball, a database, a free port) and, unseen by the
// page, where Temporal is and the ports of the page and metrics. Then it checks what the page says
// happens: the job's own table made by its migration, six windows posted with the bearer token,
// and a second backfill that changes nothing and sends nothing.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDb, SCHEMA, type TestDb } from '../../helpers/db.js';
import { freePort } from '../../helpers/net.js';
import { packedTarball } from '../../helpers/pack.js';
import { eventually, startTemporal, uniqueQueue } from '../../helpers/temporal.js';
import type { TestWorkflowEnvironment } from '@temporalio/testing';

const page = readFileSync(fileURLToPath(new URL('../../../docs/tutorial.md', import.meta.url)), 'utf8');
const blocks = [...page.matchAll(/^```(sh|js)\n([\s\S]*?)^```$/gm)].map((m) => ({
  lang: m[1]!,
  text: m[2]!,
}));
/** The exports of the page's first block, in its order: the test gives each its value. */
const EXPORTS = ['TIDEMARK_TGZ', 'DATABASE_URL', 'SHOP_HOOK_URL', 'TIDEMARK_SECRET_SHOP_HOOK_TOKEN'];
/** Blocks that keep running, each until the line that says it is ready. */
const RUNNING: Readonly<Record<string, RegExp>> = {
  'node hook.js\n': /hook listening on/,
  'npx tidemark dev\n': /tidemark is running/,
};
const BACKFILL = 'npx tidemark backfill hourly-sales --from 2026-12-01T00:00:00Z --to 2026-12-01T06:00:00Z';
const HOURS = [0, 1, 2, 3, 4, 5].map((h) => `hourly-sales/2026-12-01T0${h}:00:00Z`);

let own: TestDb;
let temporal: TestWorkflowEnvironment;
const folder = mkdtempSync(join(tmpdir(), 'tidemark-tutorial-'));
before(async () => {
  [own, temporal] = await Promise.all([createTestDb({ migrated: false }), startTemporal()]);
});
after(async () => {
  await own?.drop();
  await temporal?.teardown();
  rmSync(folder, { recursive: true, force: true });
});

interface Running {
  out: string;
  stop(): Promise<void>;
}

test(
  'the tutorial, run as written from an empty folder: a job of your own, backfilled twice, sends once',
  { timeout: 900_000 },
  async (t) => {
    const packed = await packedTarball();
    const token = 'tutorial-token-5e1d90';
    const values: Record<string, string> = {
      TIDEMARK_TGZ: packed.tarball,
      DATABASE_URL: own.url,
      SHOP_HOOK_URL: `http://127.0.0.1:${await freePort()}/sales`,
      TIDEMARK_SECRET_SHOP_HOOK_TOKEN: token,
    };
    const env: NodeJS.ProcessEnv = {
      // The machine's own (PATH, HOME, the CA certificates npm reaches its registry with).
      ...process.env,
      // Unseen by the page: this machine's Temporal and free ports, npm's cache before the registry.
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: temporal.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: uniqueQueue('tutorial'),
      TIDEMARK_WEB_PORT: String(await freePort()),
      TIDEMARK_METRICS_PORT: '0',
      TIDEMARK_METRICS_HOST: '127.0.0.1',
      npm_config_prefer_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
    };
    let cwd = folder;
    const running: Running[] = [];
    t.after(async () => {
      for (const r of running.reverse()) await r.stop();
    });
    const outputs: string[] = [];

    /** One block in bash from where the last one left off; its output, and where it ended. */
    async function shell(text: string): Promise<string> {
      const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', `${text}\nprintf '\\n@cwd %s\\n' "$PWD"`], {
        cwd,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      const code = await new Promise<number | null>((r) => child.once('exit', r));
      assert.equal(code, 0, `the block\n${text}\nexited ${code}:\n${out}`);
      cwd = /\n@cwd (.*)\n$/.exec(out)![1]!;
      return out.replace(/\n@cwd .*\n$/, '');
    }

    function keepRunning(text: string, ready: RegExp): Promise<Running> {
      // A group of its own, as a terminal's: Ctrl-C (here SIGTERM) reaches npx and what it runs.
      const child = spawn('bash', ['-c', `exec ${text}`], {
        cwd,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      const exited = new Promise<void>((done) => child.once('exit', () => done()));
      const groupAlive = () => {
        try {
          process.kill(-child.pid!, 0);
          return true;
        } catch {
          return false;
        }
      };
      const r: Running = {
        out: '',
        stop: async () => {
          if (groupAlive()) process.kill(-child.pid!, 'SIGTERM');
          await exited;
          // Every process of the group has ended, not only the first.
          await eventually(async () => (groupAlive() ? undefined : true), 60_000, `${text.trim()} to stop`);
        },
      };
      child.stdout.on('data', (d) => (r.out += d));
      child.stderr.on('data', (d) => (r.out += d));
      running.push(r);
      return eventually(
        async () => {
          if (child.exitCode !== null) throw new Error(`${text} exited ${child.exitCode}:\n${r.out}`);
          return ready.test(r.out) ? r : undefined;
        },
        180_000,
        `${text.trim()} to be ready:\n${r.out}`,
      ).then(() => r);
    }

    let hook: Running | undefined;
    let dev: Running | undefined;
    const accepted = () =>
      HOURS.map((key) => (hook?.out.match(new RegExp(`^accepted .*"window":"${key}"`, 'gm')) ?? []).length);

    for (const [i, b] of blocks.entries()) {
      if (i === 0) {
        // The exports: the names the page says, each given this test's value.
        const lines = b.text.trim().split('\n');
        assert.deepEqual(
          lines.map((l) => /^export (\w+)=/.exec(l)?.[1]),
          EXPORTS,
          'the first block exports what the test gives',
        );
        Object.assign(env, values);
        continue;
      }
      if (b.lang === 'js') {
        const name = /^\/\/ (\S+)\n/.exec(b.text)?.[1];
        assert.ok(name, `a js block names its file on its first line:\n${b.text}`);
        writeFileSync(join(cwd, name), b.text);
        continue;
      }
      const ready = RUNNING[b.text];
      if (ready) {
        const r = await keepRunning(b.text, ready);
        if (b.text.startsWith('node hook.js')) hook = r;
        else dev = r;
        continue;
      }
      const out = await shell(b.text);
      outputs.push(out);
      t.diagnostic(`$ ${b.text.trim().split('\n')[0]}\n${out.trim().split('\n').slice(-3).join('\n')}`);

      if (b.text.startsWith('npx tidemark migrate --dry-run')) {
        assert.match(out, /2026-12-01_hourly_sales/);
        // The block's two commands made the job's table (its migration) and tidemark's schema, and
        // left public with the user's tables only.
        const made = await sql<{
          t: string | null;
        }>`select to_regclass('public.hourly_sales')::text as t`.execute(own.db);
        assert.equal(made.rows[0]!.t, 'public.hourly_sales');
        const inPublic = await sql<{ name: string }>`select c.relname as name from pg_class c
        join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'public' order by 1`.execute(own.db);
        assert.deepEqual(
          inPublic.rows.map((r) => r.name),
          ['hourly_sales', 'hourly_sales_pkey', 'orders', 'orders_id_seq', 'orders_pkey'],
          "public holds the user's tables only",
        );
      }
      if (b.text.startsWith(BACKFILL)) {
        const first = outputs.filter((o) => o.includes('done: processed')).length === 1;
        if (first) {
          assert.match(out, /done: processed 6, already done 0, running elsewhere 0, failed 0/);
          assert.match(out, /2026-12-01 00:00:00\+00\s*\|\s*2\s*\|\s*2050/);
          assert.match(out, /2026-12-01 03:00:00\+00\s*\|\s*1\s*\|\s*99/);
          assert.match(out, /\(6 rows\)/);
          await eventually(
            async () => (accepted().every((n) => n === 1) ? true : undefined),
            60_000,
            `one accepted post per window:\n${hook?.out}`,
          );
        } else {
          assert.match(out, /done: processed 0, already done 6, running elsewhere 0, failed 0/);
        }
      }
    }
    assert.ok(hook && dev, 'the page starts the hook and tidemark dev');
    assert.equal(outputs.filter((o) => o.includes('done: processed')).length, 2, 'the page backfills twice');

    // The second backfill sent nothing: each window's post is done, once, with the bearer token.
    assert.deepEqual(accepted(), [1, 1, 1, 1, 1, 1]);
    assert.doesNotMatch(hook.out, /refused: bad token/);
    const effects = await sql<{ effect_key: string; status: string; attempts: number; request: unknown }>`
    select effect_key, status, attempts, request from ${sql.id(SCHEMA, 'effects')}
     where effect_key = any(${HOURS.map((k) => `${k}:post`)}::text[]) order by 1`.execute(own.db);
    assert.deepEqual(
      effects.rows.map((e) => [e.effect_key, e.status, e.attempts]),
      HOURS.map((k) => [`${k}:post`, 'done', 1]),
    );
    assert.doesNotMatch(JSON.stringify(effects.rows), new RegExp(token), 'the token is stored nowhere');
    assert.match(JSON.stringify(effects.rows[0]!.request), /SHOP_HOOK_TOKEN/);
    assert.doesNotMatch(dev.out, new RegExp(token), 'nor logged');
    const rows = await sql<{ n: number }>`select count(*)::int as n from public.hourly_sales
    where hour >= '2026-12-01T00:00:00Z' and hour < '2026-12-01T06:00:00Z'`.execute(own.db);
    assert.equal(rows.rows[0]!.n, 6);

    // Stopped as Ctrl-C stops it: cleanly, nothing failed on the way.
    await dev.stop();
    assert.doesNotMatch(dev.out, /\bERROR\b|FAILED/, dev.out);
    assert.match(
      dev.out,
      /PROCESSED job=hourly-sales window=hourly-sales\/2026-12-01T00:00:00Z input=1 applied=1/,
    );
  },
);
