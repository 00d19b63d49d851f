// Migrations since the previous release are additive (expand): its workers keep running while a new
// worker migrates at start, so nothing they read, write or call may be dropped, renamed or narrowed.
// A contract step is allowed only when listed in db/migrations/releases.ts `contractions`.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql, type Kysely } from 'kysely';
import type { Database } from '../../../db/schema.js';
import { contractions, previousRelease } from '../../../db/migrations/releases.js';
import { createTestDb, SCHEMA, tm, type TestDb } from '../../helpers/db.js';
import {
  breakingChanges,
  migrateTo,
  snapshotCatalog,
  type SchemaCatalog,
} from '../../helpers/schema-catalog.js';

const dbs: TestDb[] = [];
let released: SchemaCatalog;

/** A fresh database at the previous release point. */
async function atRelease(): Promise<Kysely<Database>> {
  const t = await createTestDb({ migrated: false });
  dbs.push(t);
  await migrateTo(t.db, previousRelease().last);
  return t.db;
}

before(async () => {
  released = await snapshotCatalog(await atRelease());
});
after(async () => {
  for (const t of dbs) await t.drop();
});

test('every migration since the previous release is additive, or a listed contraction', async () => {
  const db = await atRelease();
  await migrateTo(db, 'latest');
  const found = breakingChanges(released, await snapshotCatalog(db));
  const allowed = new Set(contractions.map((c) => c.change));
  assert.deepEqual(
    found.filter((f) => !allowed.has(f)),
    [],
    'a change the running previous release would notice: expand now, contract in a later release',
  );
  // A listed contraction that no migration makes any more is stale: the list says what ships.
  assert.deepEqual(
    contractions.filter((c) => !found.includes(c.change)).map((c) => c.change),
    [],
  );
});

test('the snapshot holds what the previous release uses (the claim, its ON CONFLICT targets, checks)', () => {
  assert.equal(
    released.functions.get(
      'tidemark_claim_window(p_job text, p_start timestamp with time zone, p_generation integer, ' +
        'p_end timestamp with time zone, p_key text, p_trigger text, p_workflow_id text, ' +
        'p_at timestamp with time zone, p_lock_timeout_ms text, p_idle_timeout_ms text)',
    ),
    'integer',
  );
  assert.equal(
    released.constraints.get('job_windows.job_windows_pk')?.def,
    'PRIMARY KEY (job, window_start, generation)',
  );
  assert.equal(released.indexes.get('incidents.incidents_one_open')?.unique, true);
  assert.equal(released.constraints.get('job_windows.job_windows_half_open')?.kind, 'c');
  assert.deepEqual(released.columns.get('job_runs.details'), {
    type: 'jsonb',
    notNull: true,
    default: "'{}'::jsonb",
  });
});

// Scratch migrations built here, never added to the real list: each must be caught.
const scratch: Record<string, (db: Kysely<unknown>) => Promise<unknown>> = {
  'dropped column job_runs.details': (db) => sql`alter table ${tm.job_runs} drop column details`.execute(db),
  'dropped column job_windows.reason': (db) =>
    sql`alter table ${tm.job_windows} rename column reason to why`.execute(db),
  'dropped function tidemark_claim_window(p_job text, p_start timestamp with time zone, p_generation integer, p_end timestamp with time zone, p_key text, p_trigger text, p_workflow_id text, p_at timestamp with time zone, p_lock_timeout_ms text, p_idle_timeout_ms text)':
    async (db) => {
      await sql`drop function ${tm.fn('tidemark_claim_window')}(text, timestamptz, integer, timestamptz, text, text, text,
        timestamptz, text, text)`.execute(db);
      await sql`create function ${tm.fn('tidemark_claim_window')}(p_job text, p_start timestamptz, p_generation integer,
        p_end timestamptz, p_key text, p_trigger text, p_workflow_id text, p_at timestamptz, p_lock_timeout_ms text,
        p_idle_timeout_ms text, p_span text) returns integer language sql as 'select 1'`.execute(db);
    },
  'changed type of column job_windows.attempts: integer -> smallint': (db) =>
    sql`alter table ${tm.job_windows} alter column attempts type smallint`.execute(db),
  'made column job_runs.reason not null': (db) =>
    sql`alter table ${tm.job_runs} alter column reason set not null`.execute(db),
  'new not-null column without a default job_windows.span_id': (db) =>
    sql`alter table ${tm.job_windows} add column span_id text not null`.execute(db),
  'new constraint on an existing table job_runs.job_runs_short_reason: CHECK ((length(reason) < 100))': (
    db,
  ) =>
    sql`alter table ${tm.job_runs} add constraint job_runs_short_reason check (length(reason) < 100)`.execute(
      db,
    ),
  [`new unique index on an existing table effects.effects_one_per_window: CREATE UNIQUE INDEX effects_one_per_window ON ${SCHEMA}.effects USING btree (window_key)`]:
    (db) => sql`create unique index effects_one_per_window on ${tm.effects} (window_key)`.execute(db),
  'dropped unique index incidents.incidents_one_open': (db) => sql`drop index incidents_one_open`.execute(db),
};

for (const [finding, up] of Object.entries(scratch)) {
  test(`a scratch migration is caught: ${finding.slice(0, 70)}`, async () => {
    const db = await atRelease();
    await migrateTo(db, 'latest', { '99991231T2359_scratch': { up: async (d) => void (await up(d)) } });
    assert.ok(breakingChanges(released, await snapshotCatalog(db)).includes(finding));
  });
}

test('additive changes pass: a new table, a nullable column, a column with a default, a plain index, a new function', async () => {
  const db = await atRelease();
  const up = async (d: Kysely<unknown>) => {
    await sql`create table ${tm.object('scratch_spans')} (id bigserial primary key, name text not null unique)`.execute(
      d,
    );
    await sql`alter table ${tm.job_runs} add column span_id text`.execute(d);
    await sql`alter table ${tm.job_windows} add column slim boolean not null default false`.execute(d);
    await sql`create index scratch_idx on ${tm.job_runs} (outcome)`.execute(d);
    await sql`create function ${tm.object('scratch_fn')}() returns integer language sql as 'select 1'`.execute(
      d,
    );
  };
  await migrateTo(db, 'latest', { '99991231T2359_scratch': { up } });
  assert.deepEqual(breakingChanges(released, await snapshotCatalog(db)), []);
});
