// The command blocks of the guides that run here, as written: every ```sh block of
// docs/guides/operating.md, backfills-and-reruns.md, housekeeping.md and effects.md marked
// `<!-- run by test/system/product/guides-docs.test.ts -->` goes to bash from the project root, the
// test setting only environment variables (the demo catalog, the ledger, Temporal, the variables a
// block names). The system is real: a fresh ledger with the demo's tables, Temporal, and the
// operating page's own `npx tidemark worker` block kept running as the worker of all the others.
// Each block must exit 0 and print what its page says.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { sql } from 'kysely';
import { scheduleIdOf, WATCH_SCHEDULE_ID } from '../../../contract/schedule-ids.js';
import { createTestDb, tm, type TestDb } from '../../helpers/db.js';
import { insertOrders, ordersBetween } from '../../helpers/jobs.js';
import { startSmtp, type TestSmtp } from '../../helpers/smtp.js';
import { runToEnd } from '../../helpers/spawn.js';
import { eventually, startTemporal, uniqueQueue } from '../../helpers/temporal.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const SELF = 'test/system/product/guides-docs.test.ts';
const PAGES = [
  'docs/guides/operating.md',
  'docs/guides/backfills-and-reruns.md',
  'docs/guides/housekeeping.md',
  'docs/guides/effects.md',
];
/** Where the housekeeping page's export writes. */
const EXPORT_FILE = '/tmp/sales-hourly.jsonl';

// ---- The pages and their blocks ------------------------------------------------------------------

interface Block {
  page: string;
  script: string;
}

/** Every ```sh block of the pages that names this file in its `run by` note. */
const marked: Block[] = [];
for (const page of PAGES) {
  const text = await readFile(join(ROOT, page), 'utf8');
  for (const m of text.matchAll(/<!--\s*run by ([^>]*?)\s*-->\s*\n```sh\n([\s\S]*?)^```$/gm))
    if (m[1]!.split(/[\s,()]+/).includes(SELF)) marked.push({ page, script: m[2]! });
}
const ran = new Set<Block>();

/** The one marked block of `page` that `match` picks out (the test fails if none or several do). */
function block(page: string, what: string, match: (script: string) => boolean): Block {
  const found = marked.filter((b) => b.page === page && match(b.script));
  assert.equal(found.length, 1, `one marked sh block of ${page} ${what}: ${found.length} found`);
  return found[0]!;
}

interface Ran {
  code: number | null;
  out: string;
  err: string;
}

/** A block as written, through bash from the project root; stops at its first failing command. */
async function sh(b: Block, extra: Record<string, string> = {}): Promise<Ran> {
  ran.add(b);
  return runToEnd('bash', ['-euo', 'pipefail', '-c', b.script], { ...env, ...extra });
}

function ok(r: Ran, what: string): string {
  assert.equal(r.code, 0, `${what} exited ${r.code}:\n${r.out}\n${r.err}`);
  return r.out;
}

// ---- The system: a ledger, Temporal, the demo catalog on a real worker ---------------------------

let db: TestDb;
let temporal: TestWorkflowEnvironment;
let smtp: TestSmtp;
let stateDir: string;
let env: Record<string, string>;
let stopWorker: (() => Promise<void>) | undefined;
let workerOut = '';

/** The orders of 2026-03-01 08:00-12:00 in Berlin (07:00-11:00 UTC): 40, every tenth without an amount. */
const MORNING = ordersBetween('guides', '2026-03-01T07:00:00Z', '2026-03-01T11:00:00Z', 40, 10);

before(async () => {
  [db, temporal, smtp] = await Promise.all([createTestDb(), startTemporal(), startSmtp()]);
  stateDir = await mkdtemp(join(tmpdir(), 'tidemark-guides-'));
  env = {
    TIDEMARK_CATALOG: 'demo',
    DATABASE_URL: db.url,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_NAMESPACE: temporal.namespace ?? 'default',
    TIDEMARK_TASK_QUEUE: uniqueQueue('guides'),
    TIDEMARK_STATE_DIR: stateDir,
    TIDEMARK_METRICS_PORT: '0',
    TIDEMARK_METRICS_HOST: '127.0.0.1',
    // Whoever asks for a rerun in the blocks (the CLI's --by, else $USER).
    USER: 'alice',
    // The daily report's e-mail goes here, from the worker and from the CLI's resend and retry.
    SMTP_HOST: '127.0.0.1',
    SMTP_PORT: String(smtp.port),
  };
  await insertOrders(db.db, MORNING);
  await rm(EXPORT_FILE, { force: true });
});
after(async () => {
  await stopWorker?.();
  await db?.drop();
  await temporal?.teardown();
  await smtp?.close();
  await rm(stateDir, { recursive: true, force: true });
  await rm(EXPORT_FILE, { force: true });
});

/** A block that keeps running, in a process group of its own: ready at `ready`, stopped with SIGTERM. */
async function keepRunning(b: Block, ready: RegExp): Promise<void> {
  ran.add(b);
  const child = spawn('bash', ['-c', `exec ${b.script}`], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  child.stdout.on('data', (d) => (workerOut += d));
  child.stderr.on('data', (d) => (workerOut += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const groupAlive = () => {
    try {
      process.kill(-child.pid!, 0);
      return true;
    } catch {
      return false;
    }
  };
  stopWorker = async () => {
    if (groupAlive()) process.kill(-child.pid!, 'SIGTERM');
    await exited;
    await eventually(async () => (groupAlive() ? undefined : true), 30_000, 'the worker to stop');
  };
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`the worker exited ${child.exitCode}:\n${workerOut}`);
      return ready.test(workerOut) ? true : undefined;
    },
    120_000,
    `the worker to poll:\n${workerOut}`,
  );
}

/** The project's CLI, for the test's own set-up (not a block of the pages). */
async function tidemark(...args: string[]): Promise<string> {
  const r = await runToEnd('npx', ['tidemark', ...args], env);
  return ok(r, `tidemark ${args.join(' ')}`);
}

// ---- The pages, in the order a reader meets the system ------------------------------------------

const OPS = 'docs/guides/operating.md';
const BR = 'docs/guides/backfills-and-reruns.md';
const HK = 'docs/guides/housekeeping.md';
const FX = 'docs/guides/effects.md';

/**
 * A block is a fixed amount of work (a CLI process a line, seconds of CPU each): on a busy machine it
 * takes a multiple of that, never waiting on anything but its own commands.
 */
const BLOCK_TIMEOUT = 900_000;

test(
  'operating.md: `npx tidemark worker` runs the demo catalog and polls',
  { timeout: 600_000 },
  async () => {
    await keepRunning(
      block(OPS, 'starts a worker', (s) => /^npx tidemark worker\b/m.test(s)),
      /worker polling task queue/,
    );
    assert.match(workerOut, /jobs: [^\n]*\bsales-hourly\b/);
    // The reader's system has its schedules (the deploy's `schedules sync`); the other demo jobs are
    // paused so that only sales-hourly ticks while the blocks run.
    await tidemark('schedules', 'sync');
    const schedules = temporal.client.schedule;
    for await (const { scheduleId } of schedules.list())
      if (scheduleId !== scheduleIdOf('sales-hourly') && scheduleId !== WATCH_SCHEDULE_ID)
        await schedules.getHandle(scheduleId).pause('quiet while the guides run');
  },
);

test(
  'backfills-and-reruns.md: a dry run, a backfill with its summary, a batched month',
  { timeout: BLOCK_TIMEOUT },
  async () => {
    const out = ok(
      await sh(block(BR, 'backfills', (s) => s.includes('backfill sales-hourly'))),
      'the backfill block',
    );
    assert.match(out, /dry run: 4 to process, 0 already done, 0 not closed yet/);
    assert.match(
      out,
      /^backfill sales-hourly\/backfill-2026-03-01T07:00:00Z-2026-03-01T11:00:00Z: 4 windows/m,
      'plain times in the job zone (Berlin, UTC+1 in March)',
    );
    assert.match(out, /^done: processed 4, already done 0, running elsewhere 0, failed 0$/m);
    // February in Berlin: 28 days of 24 windows, in batches of 200.
    assert.match(out, /: 672 windows, batches of 200\b/);
    assert.match(out, /^done: processed 672, already done 0, running elsewhere 0, failed 0$/m);
    const done = await db.db
      .selectFrom('job_windows')
      .select(({ fn }) => fn.countAll<string>().as('n'))
      .where('job', '=', 'sales-hourly')
      .where('status', '=', 'done')
      .where('window_start', '<', new Date('2026-03-02T00:00:00Z'))
      .executeTakeFirstOrThrow();
    assert.equal(Number(done.n), 676, 'every window of both ranges is done');
  },
);

describe('after the backfills, side by side', { concurrency: true, timeout: BLOCK_TIMEOUT }, () => {
  test(
    'backfills-and-reruns.md: a rerun previewed (late orders) and requested, pending',
    { timeout: BLOCK_TIMEOUT },
    async () => {
      // Late orders in the 10:00 window (09:00 UTC): the rerun would add them to the day's summary.
      await insertOrders(db.db, ordersBetween('late', '2026-03-01T09:00:00Z', '2026-03-01T10:00:00Z', 3));
      const rerun = ok(
        await sh(block(BR, 'reruns', (s) => s.includes('rerun sales-hourly'))),
        'the rerun block',
      );
      assert.match(
        rerun,
        /^preview of generation 1 \(replaces generation 0\), computed \S+:\n.*daily_sales.*\n[\s\S]*^would send no external effect$/m,
        "the preview: the day's summary row it would change, and no e-mail",
      );
      assert.match(rerun, /^rerun requested: (\S+)$/m);
      assert.match(rerun, /window sales-hourly\/2026-03-01T09:00:00Z#1 \(generation 1\)/);
      assert.match(rerun, /pending/, 'reruns lists the request, pending');
      // The preview committed nothing.
      const gens = await db.db
        .selectFrom('job_windows')
        .select('generation')
        .where('job', '=', 'sales-hourly')
        .where('window_start', '=', new Date('2026-03-01T09:00:00Z'))
        .execute();
      assert.deepEqual(
        gens.map((g) => g.generation),
        [0],
      );
    },
  );

  test(
    'operating.md: the CLI cheat sheet, against the worker: look, act, backfill again (all done), rerun',
    { timeout: BLOCK_TIMEOUT },
    async () => {
      const out = ok(
        await sh(block(OPS, 'is the cheat sheet', (s) => s.includes('npx tidemark help'))),
        'the CLI block',
      );
      // help, jobs, status, runs, preview
      assert.match(out, /^\s+quarantine\s/m, 'help lists every command');
      assert.match(out, /^sales-hourly\s+1h\s/m, 'jobs lists the job');
      assert.match(out, /^sales-hourly\/2026-0[23]-\S+\s+done\s/m, 'status shows the windows done');
      assert.match(out, /completed/, 'runs shows the backfills');
      // trigger, pause, resume
      assert.match(out, /^tick of sales-hourly fired/m);
      assert.match(out, /^sales-hourly paused: db upgrade$/m);
      assert.match(out, /^sales-hourly resumed$/m);
      // The same ranges again: nothing to do, every window already done.
      assert.match(out, /dry run: 0 to process, 4 already done, 0 not closed yet/);
      assert.match(out, /^done: processed 0, already done 4, running elsewhere 0, failed 0$/m);
      assert.match(out, /^done: processed 0, already done 672, running elsewhere 0, failed 0$/m);
      assert.match(out, /window sales-hourly\/2026-03-01T10:00:00Z#1 \(generation 1\)/);
      assert.match(out, /^rerun requested: /m);
    },
  );

  test(
    'housekeeping.md: quarantine export to a file (before a date), to stdout, as JSON',
    { timeout: BLOCK_TIMEOUT },
    async () => {
      // The backfill set aside the morning's orders without an amount; two of them are as old as a
      // reader's records quarantined in February.
      const q = await db.db
        .selectFrom('quarantine')
        .select(['id', 'record_key'])
        .where('job', '=', 'sales-hourly')
        .orderBy('id')
        .execute();
      assert.equal(
        q.length,
        MORNING.filter((o) => o.amount === null).length,
        q.map((r) => r.record_key).join(),
      );
      const old = q.slice(0, 2).map((r) => r.id);
      await sql`update ${tm.quarantine} set created_at = '2026-02-15T12:00:00Z' where id = any(${old}::bigint[])`.execute(
        db.db,
      );
      const out = ok(
        await sh(block(HK, 'exports', (s) => s.includes('quarantine export'))),
        'the export block',
      );
      assert.match(
        out,
        /^2 record\(s\) of sales-hourly quarantined before 2026-02-28T23:00:00.000Z written to \/tmp\/sales-hourly.jsonl$/m,
      );
      const file = (await readFile(EXPORT_FILE, 'utf8')).trim().split('\n');
      assert.deepEqual(
        file.map((l) => String((JSON.parse(l) as { id: string | number }).id)),
        old.map(String),
      );
      assert.equal((await stat(EXPORT_FILE)).mode & 0o777, 0o600, "the file is its owner's only");
      // stdout: a line per record; --json: one array, a record per line.
      const lines = out.split('\n').filter((l) => l.startsWith('{'));
      assert.equal(lines.length, q.length, 'JSON Lines on stdout, every record');
      const array = out.slice(out.indexOf('\n[') + 1);
      assert.equal((JSON.parse(array) as unknown[]).length, q.length, 'one JSON array');
    },
  );

  test(
    'effects.md: the list of effects in doubt, a resend decided, a failed effect retried',
    { timeout: BLOCK_TIMEOUT },
    async () => {
      // Each day's window ends failed (an effect left for a person fails the run; the backfill says
      // which window, and exits 1).
      const reportDay = async (from: string, to: string, key: string) => {
        const r = await runToEnd(
          'npx',
          ['tidemark', 'backfill', 'sales-daily-report', '--from', from, '--to', to],
          env,
        );
        assert.match(r.out, new RegExp(`failed 1 \\(${key}\\)`), `${r.out}\n${r.err}`);
      };
      // The daily report of 2026-03-01 (Berlin): its e-mail stored by the server, whose reply is lost.
      smtp.plan.push('store-then-drop');
      await reportDay('2026-03-01', '2026-03-02', 'sales-daily-report/2026-02-28T23:00:00Z');
      // The next day's: refused for good (550).
      smtp.plan.push('reject');
      await reportDay('2026-03-02', '2026-03-03', 'sales-daily-report/2026-03-01T23:00:00Z');
      const unknown = 'sales-daily-report/2026-02-28T23:00:00Z:report';
      const failed = 'sales-daily-report/2026-03-01T23:00:00Z:report';
      const statusOf = async (key: string) =>
        (await db.db.selectFrom('effects').select('status').where('effect_key', '=', key).executeTakeFirst())
          ?.status;
      await eventually(
        async () =>
          ((await statusOf(unknown)) === 'unknown' && (await statusOf(failed)) === 'failed') || undefined,
        60_000,
        'one report in doubt and one failed',
      );
      const reports = () =>
        smtp.messages.filter((m) => /finance@localhost/.test(m.to ? JSON.stringify(m.to) : '')).length;
      const sent = reports();
      const out = ok(
        await sh(
          block(FX, 'lists, decides and retries', (s) => s.includes('effects decide')),
          {
            EFFECT: unknown,
            FAILED: failed,
          },
        ),
        'the effects block',
      );
      assert.match(
        out,
        new RegExp(`^unknown\\s+${unknown}\\s+email\\b`, 'm'),
        'the list shows the effect in doubt',
      );
      assert.doesNotMatch(out, new RegExp(`^\\S+\\s+${failed}`, 'm'), 'and only it');
      assert.match(out, new RegExp(`^${unknown}: \\S+`, 'm'));
      assert.match(out, new RegExp(`^${failed}: \\S+`, 'm'));
      assert.equal(await statusOf(unknown), 'done', out);
      assert.equal(await statusOf(failed), 'done', out);
      assert.equal(reports(), sent + 2, 'each report sent once more');
    },
  );
});

test('every block marked as run by this file was run', () => {
  assert.ok(marked.length >= 5, `the pages mark their blocks: ${marked.length}`);
  assert.deepEqual(
    marked.filter((b) => !ran.has(b)).map((b) => `${b.page}:\n${b.script}`),
    [],
  );
});
