// Drills and the page's Verify under attack: the page's Verify when the browser goes away (and two at
// once), a window's drill that passes after an on-demand drill failed while the window ran, and an
// on-demand drill whose backup retention removed while the drill was starting. The windows run the
// job's handler in a transaction of the ledger as backups-cli.test.ts does; the page is the real
// web server.
import { handlerTransaction } from '../../../../activities/window-transaction.js';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { backupsCommand } from '../../../../cli/commands/backups.js';
import { CliContext } from '../../../../cli/context.js';
import { loadConfig } from '../../../../config/env.js';
import { localDestination, s3Destination, type Destination } from '../../../../jobs/backup/destination.js';
import { createServer, type Socket } from 'node:net';
import { databaseBackup, type BackupOptions } from '../../../../jobs/backup/index.js';
import { lastDrill } from '../../../../jobs/backup/drill.js';
import { freePort } from '../../../helpers/net.js';
import { previousRelease } from '../../../../db/migrations/releases.js';
import { type Catalog } from '../../../../schedules/job.js';
import { defineCatalog } from '../../../../schedules/define.js';
import { capturedIo } from '../../../helpers/cli-io.js';
import { createTestDb, tm, type TestDb } from '../../../helpers/db.js';
import { migrateTo } from '../../../helpers/schema-catalog.js';
import { memoryLogger } from '../../../../activities/logger.js';
import {
  eventually,
  realStack,
  uniqueQueue,
  windowByHand,
  windowPolicy,
  withWorker,
} from '../../../helpers/temporal.js';
import { startWeb } from '../../../helpers/web.js';

const stack = realStack(async () => {
  source = await createTestDb({ migrated: false });
  dir = await mkdtemp(join(tmpdir(), 'tm-backups-drills-'));
  await sql`create table public.items (id int primary key, label text not null)`.execute(source.db);
  await sql`insert into public.items select n, 'item ' || n from generate_series(1, 300) n`.execute(
    source.db,
  );
});
let source: TestDb;
let dir: string;
const made: string[] = [];
after(async () => {
  const admin = new pg.Client({ connectionString: source.url });
  await admin.connect();
  for (const name of made)
    await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
  await admin.end();
  await source?.drop();
});

const sibling = (suffix: string) => {
  const u = new URL(source.url);
  u.pathname = `${u.pathname}_${suffix}`;
  made.push(u.pathname.slice(1));
  return u.toString();
};
const day = (n: number) => new Date(Date.parse('2026-10-01T00:00:00Z') + n * 86_400_000);
const keyOf = (job: string, n: number) => `${job}/${day(n).toISOString().replace('.000Z', 'Z')}`;

function backupJob(name: string, destination: Destination, opts: Partial<BackupOptions> = {}) {
  return databaseBackup({
    name,
    grid: 'day',
    timezone: 'UTC',
    start: day(0).toISOString(),
    database: source.url,
    destination,
    retention: { daily: 30, weekly: 0, monthly: 0 },
    tables: ['public.items'],
    ...opts,
  });
}

/** A gate a destination's next call waits at: `atGate` once a call waits, which goes on at `release()`. */
function gate() {
  let release!: () => void;
  let reached!: () => void;
  const atGate = new Promise<void>((r) => (reached = r));
  const released = new Promise<void>((r) => (release = r));
  return { atGate, release, reached, released };
}
type Gate = ReturnType<typeof gate>;

async function backUp(catalog: Catalog, job: string, n: number): Promise<void> {
  const j = catalog.get(job);
  const window = { start: day(n), end: day(n + 1) };
  await stack.t.db.transaction().execute((trx) =>
    j.handler({
      ...handlerTransaction(trx, { job, start: window.start, generation: 0 }),
      job: j,
      window,
      key: keyOf(job, n),
      generation: 0,
      attempt: 1,
      log: () => undefined,
      copyRows: async () => 0,
    }),
  );
}

async function drill(catalog: Catalog, job: string) {
  const { lines, io } = capturedIo();
  const ctx = new CliContext(io, { ...loadConfig(), DATABASE_URL: stack.t.url }, catalog);
  try {
    const r = await backupsCommand.run(ctx, { positionals: ['drill', job], values: {} });
    return { code: r.exitCode ?? 0, lines: [...lines, ...r.lines] };
  } finally {
    await ctx.close();
  }
}

const openIncidents = (job: string) =>
  stack.t.db
    .selectFrom('incidents')
    .select(['subject', 'kind'])
    .where('job', '=', job)
    .where('closed_at', 'is', null)
    .execute();

test('Verify from the page: stopped when the browser goes away (nothing recorded), one at a time per backup', async () => {
  const root = join(dir, 'rv-web');
  const inner = localDestination(root);
  // read() hands out the object but its last byte only at the gate: a verify of a large object, under way.
  let slow: (Gate & { closed: Promise<void> }) | undefined;
  const destination: Destination = {
    ...inner,
    read: async (key) => {
      const data = await readFile(join(root, key));
      const g = slow;
      slow = undefined;
      if (!g) return Readable.from([data]);
      let closed!: () => void;
      g.closed = new Promise<void>((r) => (closed = r));
      let sent = false;
      const s = new Readable({
        read() {
          if (sent) return;
          sent = true;
          this.push(data.subarray(0, data.length - 1));
          void g.released.then(() => {
            this.push(data.subarray(data.length - 1));
            this.push(null);
          });
        },
      });
      s.once('close', () => closed());
      g.reached();
      return s;
    },
  };
  const catalog = defineCatalog([backupJob('rv-web', destination)]);
  await backUp(catalog, 'rv-web', 0);
  const web = await startWeb(stack, { token: 'rv-web-token', catalog, env: {} });
  try {
    const url = `${web.url}/api/jobs/rv-web/backups/${encodeURIComponent(keyOf('rv-web', 0))}/verify`;
    const post = (signal?: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: { authorization: 'Bearer rv-web-token', 'content-type': 'application/json' },
        body: '{}',
        ...(signal ? { signal } : {}),
      });
    const g = { ...gate(), closed: undefined as unknown as Promise<void> };
    slow = g;
    const browser = new AbortController();
    const first = post(browser.signal).catch((err: Error) => err);
    await g.atGate;

    const second = await post();
    assert.equal(second.status, 409, 'a second verify of the same backup while one runs');
    assert.match(((await second.json()) as { error: string }).error, /already being verified/);

    browser.abort(); // the tab closed
    assert.ok((await first) instanceof Error);
    const stopped = await Promise.race([
      g.closed.then(() => true),
      new Promise<boolean>((r) => setTimeout(() => r(false), 20_000).unref()),
    ]);
    g.release();
    assert.ok(stopped, 'the read of the backup is stopped when the browser goes away');
    const checks = await stack.t.db
      .selectFrom('backup_checks')
      .select(['ok', 'detail'])
      .where('job', '=', 'rv-web')
      .execute();
    assert.deepEqual(checks, [], 'an abandoned verification is no verdict on the backup');

    // Once the stopped verification has ended (its reading stopped above; pg_restore exiting), the next one runs.
    const again = await eventually(
      async () => {
        const r = await post();
        return r.status === 409 ? undefined : r;
      },
      20_000,
      'the stopped verification to end',
    );
    const text = await again.text();
    assert.equal(again.status, 200, text);
    assert.equal((JSON.parse(text) as { ok: boolean }).ok, true, text);
  } finally {
    slow?.release();
    await web.stop();
  }
});

test('Verify from the page against storage that never answers: the read is stopped with the browser, and its slot freed', async () => {
  // Backed up to a directory; then read from S3-compatible storage that takes the connection and
  // answers nothing (the same backups, as the record says).
  const root = join(dir, 'rv-stall');
  const local = localDestination(root);
  const catalog = defineCatalog([backupJob('rv-stall', local)]);
  await backUp(catalog, 'rv-stall', 0);
  const sockets = new Set<Socket>();
  let requests = 0;
  let closed = 0;
  const stalled = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', () => requests++);
    socket.on('close', () => (closed++, sockets.delete(socket)));
  });
  await new Promise<void>((r) => stalled.listen(0, '127.0.0.1', r));
  const s3 = s3Destination({
    bucket: 'backups',
    endpoint: `http://127.0.0.1:${(stalled.address() as { port: number }).port}`,
    accessKeyId: 'test',
    secretAccessKey: 'test-secret',
  });
  const stallCatalog = defineCatalog([backupJob('rv-stall', { ...s3, describe: local.describe })]);
  const web = await startWeb(stack, { token: 'rv-stall-token', catalog: stallCatalog, env: {} });
  try {
    const url = `${web.url}/api/jobs/rv-stall/backups/${encodeURIComponent(keyOf('rv-stall', 0))}/verify`;
    const post = (signal: AbortSignal) =>
      fetch(url, {
        method: 'POST',
        headers: { authorization: 'Bearer rv-stall-token', 'content-type': 'application/json' },
        body: '{}',
        signal,
      }).catch((err: Error) => err);
    for (let n = 1; n <= 3; n++) {
      // A verification waits on the storage; the browser goes away; the storage's connection is
      // dropped (the read stopped), and the next verification is not refused for want of a slot.
      const browser = new AbortController();
      const answer = post(browser.signal);
      await eventually(
        async () => (requests >= n ? true : undefined),
        20_000,
        `verification ${n} reaching the storage`,
      );
      browser.abort();
      assert.ok((await answer) instanceof Error);
      await eventually(
        async () => (closed >= n ? true : undefined),
        20_000,
        `the read of verification ${n} stopped`,
      );
    }
    assert.deepEqual(
      await stack.t.db.selectFrom('backup_checks').select('ok').where('job', '=', 'rv-stall').execute(),
      [],
      'a stopped verification is no verdict',
    );
  } finally {
    for (const s of sockets) s.destroy();
    stalled.close();
    await web.stop();
  }
});

test("a window's drill that passes after an on-demand drill failed meanwhile is the job's last drill", async () => {
  const root = join(dir, 'rv-order');
  const inner = localDestination(root);
  let held: Gate | undefined;
  // putStaging waits at the gate: the window's transaction is open and its dump under way.
  const destination: Destination = {
    ...inner,
    putStaging: async (key, body) => {
      const g = held;
      held = undefined;
      if (g) {
        g.reached();
        await g.released;
      }
      return inner.putStaging(key, body);
    },
  };
  const scratch = sibling('rv_order_scratch');
  const catalog = defineCatalog([
    backupJob('rv-order', destination, { restoreCheck: { every: 1, scratchDatabaseUrl: scratch } }),
  ]);
  await backUp(catalog, 'rv-order', 0);
  // The published backup broken: the on-demand drill of it fails.
  const file = join(root, 'rv-order/20261001T000000Z.dump');
  const b = await readFile(file);
  b[100] = b[100]! ^ 0xff;
  await writeFile(file, b);

  const g = gate();
  held = g;
  const window = backUp(catalog, 'rv-order', 1);
  await g.atGate;
  const failed = await drill(catalog, 'rv-order');
  assert.equal(failed.code, 1, failed.lines.join('\n'));
  g.release();
  await window; // its own drill, of the new backup, passed

  const last = await lastDrill(stack.t.db, 'rv-order');
  assert.deepEqual(
    [last?.ok, last?.trigger, last?.windowKey],
    [true, 'schedule', keyOf('rv-order', 1)],
    JSON.stringify(last),
  );
});

test('an on-demand drill whose backup retention removed meanwhile drills the newest one, with no false incident', async () => {
  const root = join(dir, 'rv-gone');
  const inner = localDestination(root);
  let held: Gate | undefined;
  const destination: Destination = {
    ...inner,
    read: async (key) => {
      const g = held;
      held = undefined;
      if (g) {
        g.reached();
        await g.released;
      }
      return inner.read(key);
    },
  };
  const scratch = sibling('rv_gone_scratch');
  // Windows 1 and 2 of a grid counted from day 0 drill nothing themselves; retention keeps one.
  const catalog = defineCatalog([
    backupJob('rv-gone', destination, {
      retention: { daily: 1, weekly: 0, monthly: 0 },
      restoreCheck: { every: 1000, scratchDatabaseUrl: scratch },
    }),
  ]);
  await backUp(catalog, 'rv-gone', 1);
  const g = gate();
  held = g;
  const running = drill(catalog, 'rv-gone');
  await g.atGate;
  await backUp(catalog, 'rv-gone', 2); // publishes day 2, retention removes day 1
  g.release();
  const r = await running;
  assert.equal(r.code, 0, r.lines.join('\n'));
  assert.match(r.lines[0]!, new RegExp(`drill of rv-gone ${keyOf('rv-gone', 2)}`));
  assert.deepEqual(await openIncidents('rv-gone'), []);
  const last = await lastDrill(stack.t.db, 'rv-gone');
  assert.deepEqual([last?.ok, last?.windowKey], [true, keyOf('rv-gone', 2)]);
});

test("after the upgrade, the previous release's window drills (restore_checked backups) are the last drill, not 'never'", async () => {
  const t = await createTestDb({ migrated: false });
  try {
    await migrateTo(t.db, previousRelease().last);
    // As the previous release's window wrote it (its fixture's columns): drilled, no backup_checks.
    await sql`insert into ${tm.backups} (job, window_key, window_start, destination, object_key, bytes, sha256,
        encrypted, table_counts, restore_checked, created_at, deleted_at)
      values ('prev-bk', 'prev-bk/2026-03-01T00:00:00Z', '2026-03-01 00:00:00+00', 'directory /srv/bk',
        'prev-bk/20260301T000000Z.dump', 49076, ${'a'.repeat(64)}, false, '{"orders": 140}', true,
        '2026-03-02 00:05:00+00', null),
      ('prev-bk', 'prev-bk/2026-03-02T00:00:00Z', '2026-03-02 00:00:00+00', 'directory /srv/bk',
        'prev-bk/20260302T000000Z.dump', 49076, ${'b'.repeat(64)}, false, '{"orders": 150}', false,
        '2026-03-03 00:05:00+00', null)`.execute(t.db);
    await migrateTo(t.db, 'latest');
    const last = await lastDrill(t.db, 'prev-bk');
    assert.deepEqual(
      [last?.ok, last?.trigger, last?.windowKey, last?.at],
      [true, 'schedule', 'prev-bk/2026-03-01T00:00:00Z', '2026-03-02T00:05:00.000Z'],
      JSON.stringify(last),
    );
  } finally {
    await t.drop();
  }
});

test("the incident a failed on-demand drill opened is closed by the next passing drill, a window's too", async () => {
  const root = join(dir, 'rv-inc');
  const scratch = sibling('rv_inc_scratch');
  const catalog = defineCatalog([
    backupJob('rv-inc', localDestination(root), {
      restoreCheck: { every: 1, scratchDatabaseUrl: scratch },
    }),
  ]);
  await backUp(catalog, 'rv-inc', 0);
  const file = join(root, 'rv-inc/20261001T000000Z.dump');
  const b = await readFile(file);
  b[100] = b[100]! ^ 0xff;
  await writeFile(file, b);
  assert.equal((await drill(catalog, 'rv-inc')).code, 1);
  assert.deepEqual(await openIncidents('rv-inc'), [
    { subject: 'restore-drill', kind: 'restore-drill-failed' },
  ]);

  // The next window, run by a worker: its own drill (of its new backup) passes.
  const taskQueue = uniqueQueue('rv-inc');
  await withWorker(
    stack.env,
    taskQueue,
    { db: stack.t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    async () => {
      const at = (n: number) => day(n).toISOString().replace('.000Z', 'Z');
      const r = await windowByHand(
        stack.env.client,
        taskQueue,
        'rv-inc',
        at(1),
        at(2),
        windowPolicy(1, 120_000),
      );
      assert.equal(r.outcome, 'processed');
    },
  );
  assert.deepEqual((await lastDrill(stack.t.db, 'rv-inc'))?.ok, true);
  assert.deepEqual(await openIncidents('rv-inc'), [], 'the drill passes again: its incident is closed');
});

test('an on-demand drill whose scratch database cannot be reached fails with an incident, not only an exit code', async () => {
  const root = join(dir, 'rv-down');
  // A port nobody listens on: the drill cannot even connect.
  const down = new URL(source.url);
  down.port = String(await freePort());
  down.pathname = '/rv_down_scratch';
  const catalog = defineCatalog([
    backupJob('rv-down', localDestination(root), {
      restoreCheck: { every: 1, scratchDatabaseUrl: down.toString() },
    }),
  ]);
  // The backup is made by the job without a drill of its own (it could not connect either).
  await backUp(defineCatalog([backupJob('rv-down', localDestination(root))]), 'rv-down', 0);
  const r = await drill(catalog, 'rv-down');
  assert.equal(r.code, 1, r.lines.join('\n'));
  assert.deepEqual(await openIncidents('rv-down'), [
    { subject: 'restore-drill', kind: 'restore-drill-failed' },
  ]);
});
