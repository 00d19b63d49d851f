// Hostile review of housekeeping (issue 14), batch by batch on a real database: nothing still
// needed is removed (a failed effect waits for a person, who reads its last attempt; a job's last
// run is what the overview shows), and quarantine exports are readable by their owner only.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { run as cli } from '../../cli/main.js';
import { removeBatch, type BatchScope, type Kind } from '../../jobs/housekeeping/tables.js';
import { effectsInDoubt } from '../../operator/effects.js';
import { createTestDb, type TestDb } from '../helpers/db.js';
import { capturedIo } from '../helpers/cli-io.js';

const OLD = '2026-01-01T00:00:00Z';
const CUTOFF = new Date('2026-06-01T00:00:00Z');
let t: TestDb;
let exportDir: string;

before(async () => {
  t = await createTestDb();
  exportDir = join(await mkdtemp(join(tmpdir(), 'hk-review-')), 'quarantine');
});
after(async () => t.drop());

async function drain(kind: Kind): Promise<void> {
  const scope: BatchScope = { db: t.db, key: `review/${kind}`, batchSize: 2, exportDir };
  while ((await removeBatch(scope, kind, CUTOFF)) > 0);
}

test("a failed effect (still in the operators' queue, driven again) keeps its attempts and last error", async () => {
  await t.db
    .insertInto('effects')
    .values({
      effect_key: 'r-failed',
      job: 'sales',
      name: 'r-failed',
      channel: 'email',
      policy: 'ask',
      status: 'failed',
      request: '{}',
      provider_key: 'r-failed',
    })
    .execute();
  await t.db
    .insertInto('effect_attempts')
    .values({
      effect_key: 'r-failed',
      fence: 1,
      started_at: OLD,
      finished_at: OLD,
      duration_ms: 1,
      outcome: 'failed',
      error: 'mailbox full',
    })
    .execute();
  await drain('attempts');
  const left = await t.db
    .selectFrom('effect_attempts')
    .select('error')
    .where('effect_key', '=', 'r-failed')
    .execute();
  assert.deepEqual(left, [{ error: 'mailbox full' }]);
  const shown = (await effectsInDoubt(t.db)).find((e) => e.key === 'r-failed');
  assert.equal(shown?.lastAttempt?.error, 'mailbox full');
});

test('quarantine exports are readable by their owner only (payloads are business data)', async () => {
  await t.db
    .insertInto('quarantine')
    .values({
      job: 'sales',
      window_start: OLD,
      generation: 0,
      record_key: 'k1',
      reason: 'amount missing',
      payload: JSON.stringify({ card: '4111 1111 1111 1111' }),
      created_at: OLD,
    })
    .execute();
  const old = process.umask(0o022);
  try {
    await drain('quarantine');
  } finally {
    process.umask(old);
  }
  const files = await readdir(join(exportDir, 'sales'));
  assert.equal(files.length, 1);
  assert.equal((await stat(join(exportDir, 'sales', files[0]!))).mode & 0o777, 0o600);
  assert.equal((await stat(join(exportDir, 'sales'))).mode & 0o777, 0o700);
  assert.equal((await stat(exportDir)).mode & 0o777, 0o700);
});

test("each job's last run of each kind stays (the overview's and `status`'s last run), however old", async () => {
  const run = (job: string, kind: 'tick' | 'window', at: string) => ({
    kind,
    job,
    window_start: kind === 'window' ? at : null,
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    outcome: 'processed',
  });
  await t.db
    .insertInto('job_runs')
    .values([
      run('quarterly', 'window', '2025-10-01T00:00:00Z'),
      run('quarterly', 'window', OLD),
      run('quarterly', 'tick', '2025-12-31T00:00:00Z'),
      run('quarterly', 'tick', OLD),
      run('busy', 'window', OLD),
      run('busy', 'window', '2026-11-30T00:00:00Z'),
    ])
    .execute();
  await drain('runs');
  // The overview's own query: a job's last window run.
  const last = (job: string) =>
    t.db
      .selectFrom('job_runs')
      .select(['started_at'])
      .where('job', '=', job)
      .where('kind', '=', 'window')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
  assert.equal((await last('quarterly'))?.started_at.toISOString(), '2026-01-01T00:00:00.000Z');
  const left = await t.db.selectFrom('job_runs').select(['job', 'kind']).orderBy('id').execute();
  assert.deepEqual(left, [
    { job: 'quarterly', kind: 'window' },
    { job: 'quarterly', kind: 'tick' },
    { job: 'busy', kind: 'window' },
  ]);
});

test('a closed incident stays while one of its alerts is still undelivered (the outbox reads it to tell a channel-down report)', async () => {
  const incident = (subject: string) => ({
    job: 'sales',
    subject,
    kind: 'alert-undelivered',
    opened_at: OLD,
    closed_at: OLD,
    last_error: 'smtp down',
  });
  const [pending, sent] = await t.db
    .insertInto('incidents')
    .values([incident('alerts:email:ops@x'), incident('alerts:slack:#ops')])
    .returning('id')
    .execute();
  const alert = (id: string, status: 'failed' | 'done') => ({
    effect_key: `alert:${id}:closed:email:ops@x`,
    job: 'sales',
    name: 'alert',
    channel: 'email',
    policy: 'resend' as const,
    status,
    request: '{}',
    provider_key: `alert:${id}`,
  });
  await t.db
    .insertInto('effects')
    .values([alert(String(pending!.id), 'failed'), alert(String(sent!.id), 'done')])
    .execute();
  await drain('incidents');
  const left = await t.db.selectFrom('incidents').select('subject').execute();
  assert.deepEqual(left, [{ subject: 'alerts:email:ops@x' }]);
});

test('quarantine export of a job nobody knows (a typo) is refused naming it, not an empty export', async () => {
  Object.assign(process.env, { DATABASE_URL: t.url, TIDEMARK_CATALOG: 'demo' });
  const { lines, io } = capturedIo();
  assert.equal(await cli(['quarantine', 'export', 'sales-hourlly'], io), 2, lines.join('\n'));
  assert.match(lines.join('\n'), /sales-hourlly/);
  lines.length = 0;
  // A job the catalog knows, with nothing quarantined: an empty export, no error.
  assert.equal(await cli(['quarantine', 'export', 'sales-hourly'], io), 0, lines.join('\n'));
});
