// The README's first line, end to end: npm start's program brings up a Temporal dev server
// with its Web UI, migrates a fresh database, syncs schedules, seeds, runs the demo jobs, and
// stops everything on Ctrl-C (SIGINT).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { freePort } from '../../helpers/net.js';
import { scrape, valueOf } from '../../helpers/metrics.js';
import { eventually } from '../../helpers/temporal.js';
import { windowIndex } from '../../../schedules/window-index.js';
import { parseGrid, type Grid } from '../../../schedules/windows.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => {
  // npm start's demo CRM database sits next to the one it was given.
  const crm = new URL(t.url);
  const admin = new pg.Client({
    connectionString: (() => {
      const u = new URL(t.url);
      u.pathname = '/postgres';
      return u.toString();
    })(),
  });
  await admin.connect();
  await admin.query(
    `drop database if exists ${pg.escapeIdentifier(`${crm.pathname.slice(1)}_demo_crm`)} with (force)`,
  );
  await admin.end();
  await t?.drop();
});

/** npm start's program in its own process group, as a terminal runs it; its output kept. */
async function startDev() {
  const [port, uiPort] = [await freePort(), await freePort()];
  const stateDir = await mkdtemp(join(tmpdir(), 'tidemark-dev-'));
  // `npm start` itself, as a person runs it: what stands between the terminal and bin/dev.ts
  // (npm, and formerly tsx's CLI, which SIGKILLs a child busy for 60 ms on Ctrl-C) is part of it.
  const child = spawn('npm', ['start', '--silent'], {
    cwd: fileURLToPath(new URL('../../..', import.meta.url)),
    env: {
      ...process.env,
      DATABASE_URL: t.url,
      TEMPORAL_PORT: String(port),
      TEMPORAL_UI_PORT: String(uiPort),
      TIDEMARK_STATE_DIR: stateDir,
      TEMPORAL_ADDRESS: '',
      TIDEMARK_WEB_PORT: String(await freePort()),
      TIDEMARK_METRICS_PORT: '0',
      TIDEMARK_METRICS_HOST: '127.0.0.1',
      TIDEMARK_DEMO_MARKETPLACE_URL: `http://127.0.0.1:${await freePort()}/demo-shop`,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Ctrl-C in a terminal signals the whole process group (the Temporal dev server included),
    // and so does this test.
    detached: true,
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  // Closed once npm and everything holding its output (bin/dev.ts) have exited; a signal as the shell reports it.
  const exited = new Promise<number>((r) =>
    child.once('close', (code, signal) => r(code ?? 128 + constants.signals[signal!])),
  );
  return {
    uiPort,
    get out() {
      return out;
    },
    /** Signals the process group; returns the output from then on once it has exited, and its exit code. */
    async stop(signal: NodeJS.Signals): Promise<Stopped> {
      const from = out.length;
      process.kill(-child.pid!, signal);
      const code = await exited;
      return { signal, code, after: out.slice(from) };
    },
  };
}

interface Stopped {
  signal: NodeJS.Signals;
  code: number;
  after: string;
}

/** Stopped as a person expects: a short stopping line, no error and no stack trace. */
function assertStoppedCleanly({ signal, code, after }: Stopped): void {
  // 0 from bin/dev.ts; npm reports the signal it was stopped by (130 for Ctrl-C), as a shell does.
  assert.ok(code === 0 || code === 128 + constants.signals[signal], `exit code ${code}:\n${after}`);
  assert.match(after, /\[tidemark\] stopping/);
  assert.match(after, /\[tidemark\] stopped\./);
  assert.doesNotMatch(after, /^\s+at /m, 'no stack trace');
  assert.doesNotMatch(after, /error/i, 'no error');
}

test('npm start: up, demo jobs processed, Web UI served, clean stop on SIGINT', async () => {
  const dev = await startDev();
  const { uiPort } = dev;
  let stopped: Stopped | undefined;
  try {
    await eventually(
      async () => (dev.out.includes('tidemark is running') ? true : undefined),
      90_000,
      `npm start to come up:\n${dev.out}`,
    );
    assert.match(dev.out, new RegExp(`Web UI: http://127.0.0.1:${uiPort}/namespaces/default/workflows`));
    assert.match(dev.out, /\+ create tidemark:sales-hourly/);
    await eventually(
      async () =>
        /PROCESSED job=sales-hourly window=sales-hourly\/\S+ input=40 applied=\d+ quarantined=\d+/.test(
          dev.out,
        )
          ? true
          : undefined,
      60_000,
      `a processed window:\n${dev.out}`,
    );
    await eventually(
      async () => (/BACKFILL job=sales-hourly .* failed=0/.test(dev.out) ? true : undefined),
      60_000,
      `the demo backfill:\n${dev.out}`,
    );
    // Readable lines in the terminal (pino-pretty), not JSON: time, level, the message.
    assert.match(dev.out, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: PROCESSED job=sales-hourly window=/m);
    assert.match(dev.out, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: \[tidemark\] schedules synced:/m);
    assert.doesNotMatch(dev.out, /^\{"level"/m);
    // Every demo job kind ran its first window.
    for (const job of [
      'sales-daily-report',
      'customer-sync',
      'db-backup',
      'housekeeping',
      'marketplace-prices',
    ]) {
      await eventually(
        async () => (new RegExp(`PROCESSED job=${job} `).test(dev.out) ? true : undefined),
        60_000,
        `${job} to process a window:\n${dev.out}`,
      );
    }
    // The demo backup restore-checks every 7th day of its grid (counted from the epoch).
    const [, backupStart, checked] =
      /BACKUP job=db-backup window=db-backup\/(\S+) .*?( restore-checked)?\n/.exec(dev.out) ?? [];
    assert.ok(backupStart, dev.out);
    const day = parseGrid('day') as Grid;
    const nth = windowIndex(day, 'Europe/Berlin', new Date(backupStart)) % 7 === 0;
    assert.equal(!!checked, nth, `restore check of ${backupStart} (every 7th day)`);
    const days = await t.db
      .withSchema(DEMO_SCHEMA)
      .selectFrom('daily_sales')
      .select(['day', 'order_count'])
      .where('job', '=', 'sales-hourly')
      .execute();
    assert.ok(days.reduce((s, d) => s + d.order_count, 0) > 900, JSON.stringify(days));
    // The management page answers with the token npm start printed.
    const [, webUrl, webToken] = /Management\s+(\S+)\s+token: (\S+)/.exec(dev.out) ?? [];
    assert.ok(webUrl && webToken, dev.out);
    assert.equal((await fetch(`${webUrl}/api/state`)).status, 401);
    const state = await fetch(`${webUrl}/api/state`, { headers: { authorization: `Bearer ${webToken}` } });
    assert.equal(state.status, 200);
    assert.ok(((await state.json()) as { jobs: unknown[] }).jobs.length >= 7);
    // Its metrics and health at the address it printed: the windows it processed are counted.
    const [, metricsUrl] = /Metrics\s+(\S+)\/metrics/.exec(dev.out) ?? [];
    assert.ok(metricsUrl, dev.out);
    assert.equal((await fetch(`${metricsUrl}/readyz`)).status, 200);
    const processed = dev.out.match(/PROCESSED job=sales-hourly /g)!.length;
    const samples = await scrape(metricsUrl);
    const counted = valueOf(samples, 'tidemark_windows_total', {
      job: 'sales-hourly',
      outcome: 'processed',
      reason: '',
    })!;
    assert.ok(counted >= processed, `${counted} counted, ${processed} logged`);
    assert.ok(samples.some((x) => x.name === 'temporal_worker_task_slots_available'));
    const ui = await fetch(`http://127.0.0.1:${uiPort}/`);
    assert.equal(ui.status, 200);
    assert.match(await ui.text(), /<html/i);
  } finally {
    stopped = await dev.stop('SIGINT');
  }
  assertStoppedCleanly(stopped);
  await assert.rejects(fetch(`http://127.0.0.1:${uiPort}/`), 'the Web UI is gone with the server');
});

test('npm start: a SIGTERM while it is still starting stops it cleanly too, Temporal dev server included', async () => {
  const dev = await startDev();
  try {
    // Right after the schedules sync it bundles the workflows: busy, as a process starting up is.
    await eventually(
      async () => (dev.out.includes('schedules synced') ? true : undefined),
      90_000,
      `npm start to sync its schedules:\n${dev.out}`,
    );
  } finally {
    assertStoppedCleanly(await dev.stop('SIGTERM'));
  }
  await assert.rejects(fetch(`http://127.0.0.1:${dev.uiPort}/`), 'the Temporal dev server stopped with it');
});
