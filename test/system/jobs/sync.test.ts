// The data-sync job kind end to end: two targets, upserts and deletes, a version guard,
// reconciliation that alerts with the differing keys, idempotence, and a row whose
// transaction commits late with an earlier timestamp.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { closeSyncSources, dataSync } from '../../../jobs/data-sync.js';
import type { Database } from '../../../db/schema.js';
import { defineCatalog } from '../../../schedules/define.js';
import type { WindowRunResult } from '../../../contract/workflows.js';
import { startChat, type TestChat } from '../../helpers/chat.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { chatTexts, depsWithChannels } from '../../helpers/effects.js';
import { startSmtp, type TestSmtp } from '../../helpers/smtp.js';
import { realStack, uniqueQueue, withWorker } from '../../helpers/temporal.js';

const stack = realStack(async ({ t }) => {
  for (const schema of ['crm', 'billing']) {
    await sql`create schema ${sql.id(schema)}`.execute(t.db);
    await sql`create table ${sql.id(schema, 'customers')} (id text primary key, name text not null, email text, updated_at timestamptz not null)`.execute(
      t.db,
    );
  }
});
let source: TestDb;
let smtp: TestSmtp;
let chat: TestChat;
before(async () => {
  [source, smtp, chat] = await Promise.all([createTestDb(), startSmtp({ requireAuth: true }), startChat()]);
  await sql`create table public.customers (id text primary key, name text not null, email text, updated_at timestamptz not null default now(), deleted_at timestamptz)`.execute(
    source.db,
  );
});
after(async () => {
  await closeSyncSources();
  await source?.drop();
  await smtp?.close();
  await chat?.close();
});

const W1 = { start: '2026-07-01T10:00:00Z', end: '2026-07-01T11:00:00Z' };

async function target(db: Kysely<Database>, schema: string): Promise<Record<string, string>> {
  const r = await sql<{
    id: string;
    name: string;
    email: string | null;
  }>`select id, name, email from ${sql.id(schema, 'customers')} order by id`.execute(db);
  return Object.fromEntries(r.rows.map((x) => [x.id, `${x.name}|${x.email}`]));
}

function syncJob(name: string, extra: object = {}) {
  return dataSync({
    name,
    grid: '1h',
    start: W1.start,
    alerts: { telegram: ['ops-chat'] },
    retry: { maximumAttempts: 10, initialInterval: '200ms', maximumInterval: '2s' },
    source: {
      url: source.url,
      table: 'public.customers',
      key: 'id',
      columns: ['name', 'email'],
      updatedAt: 'updated_at',
      deletedAt: 'deleted_at',
    },
    targets: [{ table: 'crm.customers' }, { table: 'billing.customers' }],
    ...extra,
  });
}

const policy = {
  retry: { maximumAttempts: 10, initialInterval: '200ms', maximumInterval: '2s', backoffCoefficient: 2 },
  startToCloseTimeoutMs: 30_000,
};

test('a window synced to two targets: upserts, deletes, version guard, reconciliation alert; run twice, nothing changes', async () => {
  const job = 'customers-sync';
  // Source: 20 customers written in W1, one of them deleted in W1, one updated again later (W2).
  for (let i = 0; i < 20; i++) {
    await sql`insert into public.customers (id, name, email, updated_at) values (${`c-${i}`}, ${`Customer ${i}`}, ${`c${i}@example.test`}, ${new Date(Date.parse(W1.start) + i * 60_000)})`.execute(
      source.db,
    );
  }
  await sql`update public.customers set deleted_at = updated_at where id = 'c-5'`.execute(source.db);
  await sql`update public.customers set name = 'Customer 7 (renamed)', updated_at = '2026-07-01T11:30:00Z' where id = 'c-7'`.execute(
    source.db,
  );
  // Targets: c-5 exists from an earlier sync; billing has a newer c-3 written by someone else.
  for (const schema of ['crm', 'billing']) {
    await sql`insert into ${sql.id(schema, 'customers')} values ('c-5', 'Customer 5', 'c5@example.test', '2026-06-30T00:00:00Z')`.execute(
      stack.t.db,
    );
  }
  await sql`insert into billing.customers values ('c-3', 'Customer 3 (billing edit)', 'x@example.test', '2099-01-01T00:00:00Z')`.execute(
    stack.t.db,
  );

  const catalog = defineCatalog([syncJob(job)]);
  const taskQueue = uniqueQueue(job);
  const alertsBefore = chatTexts(chat, 'telegram').length;
  const run = () =>
    stack.env.client.workflow.execute('window', {
      taskQueue,
      workflowId: `${job}/2026-07-01T10:00:00Z`,
      args: [
        {
          job,
          start: W1.start,
          end: W1.end,
          generation: 0,
          key: `${job}/2026-07-01T10:00:00Z`,
          trigger: 'manual',
          policy,
        },
      ],
    }) as Promise<WindowRunResult>;
  await withWorker(stack.env, taskQueue, depsWithChannels(stack.t.db, catalog, smtp, chat), async () => {
    const r = await run();
    assert.equal(r.outcome, 'processed');
    // W1's query sees 19 rows: c-7 moved to W2 with its rename.
    assert.deepEqual(r.counts, { input: 19, applied: 19, quarantined: 0 });
    const expected = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => i)
        .filter((i) => i !== 5 && i !== 7)
        .map((i) => [`c-${i}`, `Customer ${i}|c${i}@example.test`]),
    );
    assert.deepEqual(await target(stack.t.db, 'crm'), expected);
    assert.deepEqual(
      await target(stack.t.db, 'billing'),
      { ...expected, 'c-3': 'Customer 3 (billing edit)|x@example.test' },
      'the newer billing row was not overwritten',
    );
    const alerts = chatTexts(chat, 'telegram').slice(alertsBefore);
    assert.equal(alerts.length, 1);
    assert.match(
      alerts[0]!,
      /billing\.customers differs from public\.customers for 1 of 19 key\(s\) of the window .*: c-3/,
    );

    const snapshot = [await target(stack.t.db, 'crm'), await target(stack.t.db, 'billing')];
    assert.equal((await run()).outcome, 'already-done');
    assert.deepEqual([await target(stack.t.db, 'crm'), await target(stack.t.db, 'billing')], snapshot);
    assert.equal(chatTexts(chat, 'telegram').length - alertsBefore, 1);
  });
});

test('a row whose transaction commits late with an earlier timestamp is not lost', async () => {
  const job = 'late-sync';
  // The window is the current minute; the job's clock runs three minutes ahead so it counts as closed.
  const catalog = defineCatalog([
    dataSync({
      name: job,
      grid: '1m',
      alerts: {},
      retry: { maximumAttempts: 20, initialInterval: '200ms', maximumInterval: '2s' },
      source: {
        url: source.url,
        table: 'public.customers',
        key: 'id',
        columns: ['name', 'email'],
        updatedAt: 'updated_at',
      },
      targets: [{ table: 'crm.customers' }],
    }),
  ]);
  const deps = {
    ...depsWithChannels(stack.t.db, catalog, smtp, chat),
    now: () => new Date(Date.now() + 180_000),
  };
  const slow = new pg.Client({ connectionString: source.url });
  await slow.connect();
  try {
    await slow.query('begin');
    const { rows } = await slow.query<{ at: Date }>(
      "insert into public.customers (id, name) values ('late-1', 'Late Customer') returning updated_at as at",
    );
    const start = new Date(Math.floor(rows[0]!.at.getTime() / 60_000) * 60_000);
    const key = `${job}/${start.toISOString().replace('.000Z', 'Z')}`;
    const taskQueue = uniqueQueue(job);
    await withWorker(stack.env, taskQueue, deps, async () => {
      const handle = await stack.env.client.workflow.start('window', {
        taskQueue,
        workflowId: key,
        args: [
          {
            job,
            start: start.toISOString(),
            end: new Date(start.getTime() + 60_000).toISOString(),
            generation: 0,
            key,
            trigger: 'manual',
            policy,
          },
        ],
      });
      // The window waits while the slow transaction is open...
      await new Promise((r) => setTimeout(r, 1_500));
      const runs = await stack.t.db
        .selectFrom('job_runs')
        .select(['outcome', 'reason'])
        .where('job', '=', job)
        .execute();
      assert.ok(
        runs.length >= 1 &&
          runs.every((x) => x.outcome === 'failed' && /open transaction/.test(x.reason ?? '')),
        JSON.stringify(runs),
      );
      // ...and takes the row once it commits.
      await slow.query('commit');
      const r = (await handle.result()) as WindowRunResult;
      assert.equal(r.outcome, 'processed');
      assert.equal(r.counts?.input, 1);
    });
    assert.equal((await target(stack.t.db, 'crm'))['late-1'], 'Late Customer|null');
  } finally {
    await slow.end();
  }
});
