// Upgrade review (issue 14): hosts that start at once on a database that does not exist yet, and
// what `npm run migrate` says about a DATABASE_URL it cannot use (never its password).
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, test } from 'node:test';
import pg from 'pg';
import { ensureDatabase } from '../../db/database.js';

const serverUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const names: string[] = [];
after(async () => {
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  for (const n of names) await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(n)} WITH (FORCE)`);
  await admin.end();
});

test('hosts starting at once on a database that does not exist yet all go on: one creates it, none fails', async () => {
  // Each round: four hosts' ensureDatabase() at once (two CREATE DATABASE at once: one of them failed
  // with a unique violation on pg_database, reported as "cannot be reached").
  for (let round = 0; round < 4; round++) {
    const name = `tidemark_test_${process.pid}_new_${randomBytes(4).toString('hex')}`;
    names.push(name);
    const u = new URL(serverUrl);
    u.pathname = `/${name}`;
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => ensureDatabase(u.toString())));
    assert.deepEqual(
      results.flatMap((r) => (r.status === 'rejected' ? [(r.reason as Error).message] : [])),
      [],
    );
  }
});
