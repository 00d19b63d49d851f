// db/schema.sql is the schema the migrations make, in one file to read: a fresh database migrated to
// the latest and dumped as scripts/dump-schema.ts dumps it must print exactly that file.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { firstDifference, migratedSchema, SCHEMA_FILE } from '../../helpers/schema-dump.js';
import { SCHEMA } from '../../helpers/db.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';

const checkedIn = (): Promise<string | null> =>
  readFile(SCHEMA_FILE, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });

test('db/schema.sql is the schema a fresh database has after migrating', async () => {
  const file = await checkedIn();
  assert.ok(file !== null, 'db/schema.sql is missing: run npm run schema:dump');
  const diff = firstDifference(file, await migratedSchema());
  assert.equal(diff, null, `db/schema.sql is not what the migrations make: run npm run schema:dump\n${diff}`);
});

test("db/schema.sql holds the ledger's tables, keys, indexes and functions, not the demo's, and no machine noise", async () => {
  const file = (await checkedIn()) ?? '';
  for (const part of [
    `CREATE TABLE ${SCHEMA}.job_windows (`,
    `CREATE TABLE ${SCHEMA}.quarantine (`,
    'ADD CONSTRAINT job_done_spans_pk PRIMARY KEY (job, span_start);',
    `CREATE INDEX job_runs_finished_idx ON ${SCHEMA}.job_runs USING btree (finished_at);`,
    `CREATE FUNCTION ${SCHEMA}.tidemark_claim_window(`,
    `CREATE FUNCTION ${SCHEMA}.tidemark_finish_window(`,
  ])
    assert.ok(file.includes(part), `db/schema.sql has ${part}`);
  for (const noise of [
    /Dumped (from|by)/,
    /^\\(un)?restrict /m,
    /^SET /m,
    /kysely_migration/,
    new RegExp(DEMO_SCHEMA),
  ])
    assert.doesNotMatch(file, noise);
});
