// sslmode=prefer (the default) through db/pg-socket.ts on the shared server, which answers "no
// TLS": a connection killed by the server ends as it does on pg's own socket (sslmode=disable).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pgClient } from '../../../db/pg-connection.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';

let t: TestDb;
before(async () => {
  t = await createTestDb({ migrated: false });
});
after(() => t?.drop());

const withMode = (mode: string) => {
  const u = new URL(t.url);
  u.searchParams.set('sslmode', mode);
  return u.toString();
};

test("a backend terminated while its extended query waits on a lock: the server's FATAL error, then the close, never a reset", async () => {
  const admin = pgClient(withMode('disable'));
  await admin.connect();
  try {
    await admin.query('create table public.locked (id int primary key)');
    await admin.query('insert into public.locked values (1)');
    // Whether the Sync is read in time is a race: many rounds, so that a lost cork shows.
    for (const mode of ['disable', ...Array<string>(12).fill('prefer')]) {
      await admin.query('begin');
      await admin.query('select 1 from public.locked where id = 1 for update');
      const victim = pgClient(withMode(mode));
      const errors: string[] = [];
      victim.on('error', (e: Error) => errors.push(e.message));
      await victim.connect();
      const { rows } = await victim.query<{ pid: number }>('select pg_backend_pid() as pid');
      // Parse, Bind, Describe, Execute, Sync: pg corks them into one write; the backend reads
      // them all before it waits. A Sync still unread when it exits would make its socket reset.
      const outcome = (p: Promise<unknown>) =>
        p.then(
          () => 'done',
          (e: Error) => e.message,
        );
      const waiting = outcome(victim.query('delete from public.locked where id = $1', [1]));
      const after = outcome(victim.query('select 1')); // queued, as a transaction's ROLLBACK would be
      for (;;) {
        const w = await admin.query(
          `select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`,
          [rows[0]!.pid],
        );
        if (w.rowCount) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await admin.query('select pg_terminate_backend($1)', [rows[0]!.pid]);
      assert.match(await waiting, /terminating connection due to administrator command/, mode);
      assert.match(await after, /Connection terminated/, mode);
      await admin.query('rollback');
      assert.deepEqual(
        errors.filter((e) => /ECONNRESET/.test(e)),
        [],
        `${mode}: ${errors.join('; ')}`,
      );
    }
  } finally {
    await admin.end();
  }
});
