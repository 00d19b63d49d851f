// `tidemark dev` with a catalog of the user's own runs the user's jobs and nothing of the demo: no
// demo tables, no seeded or trickled orders, no marketplace simulator, no job fired or backfilled
// that nobody asked for. `--backfill <span>` asks for one, and says what it started.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { freePort } from '../../helpers/net.js';
import { eventually, realStack, uniqueQueue } from '../../helpers/temporal.js';

const stack = realStack();
// The user's own database: their table, nothing of tidemark's yet (the stack's has the demo's tables).
let own: TestDb;
before(async () => {
  own = await createTestDb({ migrated: false });
  await sql`create table public.my_ticks (window_key text primary key, window_start timestamptz not null)`.execute(
    own.db,
  );
});
const dir = mkdtempSync(join(tmpdir(), 'tidemark-dev-own-'));
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await own?.drop();
});

const CATALOG = `import { defineCatalog, defineJob, sql } from '${fileURLToPath(new URL('../../../index.ts', import.meta.url))}';

export default defineCatalog([
  defineJob({
    name: 'my-ticks',
    grid: '1h',
    lateness: '0m',
    // Yearly: no tick of its own writes the table while a test runs (an hourly one fires at :00).
    tick: { cron: '0 0 1 1 *' },
    handler: async ({ trx, window, key }) => {
      await sql\`insert into public.my_ticks (window_key, window_start) values (\${key}, \${window.start})\`.execute(trx);
      return { input: 1, applied: 1, quarantined: 0 };
    },
  }),
]);
`;

/** `tidemark dev --catalog <the user's>` with `args`, until it says it is running; its output. */
async function dev(args: string[], taskQueue: string) {
  const catalog = join(dir, 'tidemark.config.mjs');
  writeFileSync(catalog, CATALOG);
  const marketPort = await freePort();
  const child = spawn(process.execPath, ['bin/tidemark.js', 'dev', '--catalog', catalog, ...args], {
    cwd: fileURLToPath(new URL('../../..', import.meta.url)),
    env: {
      ...process.env,
      DATABASE_URL: own.url,
      TEMPORAL_ADDRESS: stack.env.address,
      TEMPORAL_NAMESPACE: stack.env.namespace ?? 'default',
      TIDEMARK_TASK_QUEUE: taskQueue,
      TIDEMARK_STATE_DIR: join(dir, 'state'),
      TIDEMARK_WEB_PORT: String(await freePort()),
      TIDEMARK_METRICS_PORT: '0',
      TIDEMARK_METRICS_HOST: '127.0.0.1',
      TIDEMARK_DEMO_MARKETPLACE_URL: `http://127.0.0.1:${marketPort}/demo-shop`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`tidemark dev exited ${child.exitCode}:\n${out}`);
      return /tidemark is running/.test(out) ? true : undefined;
    },
    180_000,
    `tidemark dev to be running:\n${out}`,
  );
  return {
    marketPort,
    get out() {
      return out;
    },
    async stop() {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, out);
    },
  };
}

const workflowsOf = async (type: string) => {
  const ids: string[] = [];
  for await (const w of stack.env.client.workflow.list({ query: `WorkflowType = '${type}'` }))
    ids.push(w.workflowId);
  return ids;
};

test("tidemark dev with the user's catalog runs nothing of the demo and nothing nobody asked for", async () => {
  const run = await dev([], uniqueQueue('dev-own'));
  try {
    assert.match(
      run.out,
      /your jobs run on their schedules\. To run past windows now: tidemark dev --backfill 24h/,
    );
    assert.doesNotMatch(run.out, /demo data seeded|marketplace simulator|backfill of/);
    const demoSchema = await sql<{
      s: string | null;
    }>`select to_regnamespace('tidemark_demo')::text as s`.execute(own.db);
    assert.equal(demoSchema.rows[0]!.s, null, 'no demo tables');
    // Nothing listens where the demo's marketplace simulator would.
    await assert.rejects(fetch(`http://127.0.0.1:${run.marketPort}/demo-shop/v1/items`));
    assert.deepEqual(await workflowsOf('backfill'), []);
    const ticks = await sql<{ n: number }>`select count(*)::int as n from public.my_ticks`.execute(own.db);
    assert.equal(ticks.rows[0]!.n, 0);
  } finally {
    await run.stop();
  }
});

test('tidemark dev --backfill 3h backfills the closed windows of the past three hours, once each', async () => {
  const before = Date.now();
  const run = await dev(['--backfill', '3h'], uniqueQueue('dev-own-backfill'));
  try {
    assert.match(run.out, /backfill of my-ticks, tidemark-housekeeping over the past 3h started/);
    const hour = 3_600_000;
    // The closed hours starting in [now - 3h, now), for the now tidemark dev took: between these two.
    const closedHours = (now: number) => {
      const starts: string[] = [];
      for (let s = Math.ceil((now - 3 * hour) / hour) * hour; s + hour <= now; s += hour)
        starts.push(new Date(s).toISOString());
      return starts;
    };
    const started = Date.now();
    const expected = [closedHours(before), closedHours(started)];
    const rows = await eventually(
      async () => {
        const r = await sql<{
          window_start: Date;
        }>`select window_start from public.my_ticks order by 1`.execute(own.db);
        const got = r.rows.map((x) => x.window_start.toISOString());
        return expected.some((e) => e.length === got.length) ? got : undefined;
      },
      120_000,
      'the backfilled windows',
    );
    assert.ok(
      expected.some((e) => JSON.stringify(e) === JSON.stringify(rows)),
      `${rows.join(', ')} is one of ${expected.map((e) => e.join(', ')).join(' / ')}`,
    );
  } finally {
    await run.stop();
  }
});
