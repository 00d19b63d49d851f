// A connection that dies while a transaction holds it (a PostgreSQL restart, pg_terminate_backend,
// a failover) must fail that transaction, not the process: pg's pool drops its error listener
// from a client while the client is checked out, and an 'error' event with no listener would
// kill a worker with every transaction it had open.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { createDb } from '../../../db/database.js';
import { pgClient } from '../../../db/pg-connection.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { eventually } from '../../helpers/temporal.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => {
  await t?.drop();
});

test('a connection terminated between two statements of a transaction fails it; the process and the pool live on', async () => {
  const db = createDb(t.url, { max: 2 });
  try {
    const outcome = db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      // Between statements: the client is checked out, no query in flight.
      await sql`select pg_terminate_backend(${rows[0]!.pid})`.execute(t.db);
      await eventually(
        async () => {
          const { rows: left } = await sql<{ n: number }>`
            select count(*)::int as n from pg_stat_activity where pid = ${rows[0]!.pid}`.execute(t.db);
          return left[0]!.n === 0 ? true : undefined;
        },
        10_000,
        'the backend to be gone',
      );
      // The socket's close reaches the client after the backend is gone: give it the turn.
      await new Promise((r) => setTimeout(r, 200));
      await sql`select 1`.execute(trx);
    });
    await assert.rejects(outcome, /terminat|Connection|closed/i);
    const { rows } = await sql<{ one: number }>`select 1 as one`.execute(db);
    assert.equal(rows[0]!.one, 1);
  } finally {
    await db.destroy();
  }
});

test("a single client's backend terminated mid-statement fails the statement, not the process", async () => {
  const c = pgClient(t.url);
  await c.connect();
  try {
    const { rows } = await c.query<{ pid: number }>('select pg_backend_pid() as pid');
    // Its failure is awaited from the start: the rejection may come before the terminate's reply.
    const sleeping = assert.rejects(c.query('select pg_sleep(5)'), /terminat|Connection/i);
    await eventually(
      async () => {
        const { rows: active } = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
           where pid = ${rows[0]!.pid} and query like 'select pg_sleep%'`.execute(t.db);
        return active[0]!.n === 1 ? true : undefined;
      },
      10_000,
      'the statement to run',
    );
    await sql`select pg_terminate_backend(${rows[0]!.pid})`.execute(t.db);
    await sleeping;
    // The client's 'error' event comes after the rejection: without a listener it would end the
    // process (an uncaught exception here fails this file).
    await new Promise((r) => setTimeout(r, 300));
    await assert.rejects(c.query('select 1'), /not queryable|terminat|Connection/i);
  } finally {
    await c.end().catch(() => undefined);
  }
});
