// The independent checker (test/helpers/invariants.ts) against hand-made ledger states: a done
// window whose effect was never recorded must count as a lost effect, not pass silently; an e-mail
// counts as the effect's delivery by its content, not its subject; the quarantine holds each done
// generation's bad records exactly once, and nothing of a generation not done; a backup window is
// kept once, as recorded, its drill recorded once, its scratch database dropped.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type { ParsedMail } from 'mailparser';
import { recordEffects } from '../../../db/effects.js';
import { DEMO_SCHEMA } from '../../../jobs/demo-schema.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { checkBackupInvariants, checkInvariants, violations } from '../../helpers/invariants.js';

const JOB = 'inv-check';
const start = new Date('2015-01-01T00:00:00Z');
const end = new Date('2015-01-01T01:00:00Z');
const key = `${JOB}/2015-01-01T00:00:00Z`;
const windows = [{ start, end }];
let t: TestDb;

before(async () => {
  t = await createTestDb();
  // A window done with no orders in it, the watermark at its end, and no effect recorded.
  await t.db
    .insertInto('job_windows')
    .values({
      job: JOB,
      window_start: start,
      window_end: end,
      window_key: key,
      status: 'done',
      trigger: 'manual',
      workflow_id: null,
      started_at: start,
    })
    .execute();
  await t.db.insertInto('job_watermarks').values({ job: JOB, watermark: end, updated_at: end }).execute();
});
after(async () => await t?.drop());

test('a done window whose report effect was never recorded is a lost effect', async () => {
  const noSinks = { emails: [], chat: [] };
  assert.deepEqual(violations(await checkInvariants(t.db, JOB, windows, noSinks)), []);
  const r = await checkInvariants(t.db, JOB, windows, noSinks, { effectsPerWindow: ['report'] });
  assert.deepEqual(r.lost, [`effect ${key}:report: window done, effect never recorded`]);

  // Recorded, done and received once: clean.
  await recordEffects(t.db, [
    {
      key: `${key}:report`,
      job: JOB,
      windowKey: key,
      name: 'report',
      channel: 'email',
      policy: 'ask',
      request: { to: ['ops@example.test'], subject: `report ${key}`, text: 'orders: 0' },
      providerKey: `${key}:report`,
    },
  ]);
  await t.db
    .updateTable('effects')
    .set({ status: 'done' })
    .where('effect_key', '=', `${key}:report`)
    .execute();
  const mail = (text: string) =>
    ({
      subject: `report ${key}`,
      text: `${text}\n`,
      to: { value: [{ address: 'ops@example.test', name: '' }], html: '', text: '' },
    }) as ParsedMail;
  // The subject alone is no delivery: a message with other content is not this effect's.
  const other = await checkInvariants(
    t.db,
    JOB,
    windows,
    { emails: [mail('orders: 7')], chat: [] },
    { effectsPerWindow: ['report'] },
  );
  assert.deepEqual(other.lost, [`effect ${key}:report (email, done): marked done, never received`]);
  assert.deepEqual(other.other, [
    `effect ${key}:report (email, done): 1 message with its subject but other content`,
  ]);
  // Delivered as asked, however the mail carried it: CRLF line ends, a display name, the domain's case.
  await t.db
    .updateTable('effects')
    .set({
      request: JSON.stringify({
        to: ['Ops Team <ops@Example.TEST>'],
        subject: `report ${key}`,
        text: 'orders: 0\r\nall good',
      }),
    })
    .where('effect_key', '=', `${key}:report`)
    .execute();
  const carried = {
    ...mail('orders: 0\nall good'),
    to: { value: [{ address: 'ops@example.test', name: 'Ops Team' }], html: '', text: '' },
  } as ParsedMail;
  assert.deepEqual(
    violations(
      await checkInvariants(
        t.db,
        JOB,
        windows,
        { emails: [carried], chat: [] },
        { effectsPerWindow: ['report'] },
      ),
    ),
    [],
  );
  await t.db
    .updateTable('effects')
    .set({
      request: JSON.stringify({ to: ['ops@example.test'], subject: `report ${key}`, text: 'orders: 0' }),
    })
    .where('effect_key', '=', `${key}:report`)
    .execute();
  const emails = [mail('orders: 0')];
  const ok = await checkInvariants(
    t.db,
    JOB,
    windows,
    { emails, chat: [] },
    { effectsPerWindow: ['report'] },
  );
  assert.deepEqual(violations(ok), []);
});

test("the quarantine holds each done generation's bad records, and none of a generation not done", async () => {
  const job = 'inv-quarantine';
  const wkey = `${job}/2015-01-01T00:00:00Z`;
  await t.db
    .insertInto('job_windows')
    .values(
      [0, 1].map((generation) => ({
        job,
        window_start: start,
        window_end: end,
        window_key: generation ? `${wkey}#1` : wkey,
        generation,
        status: generation ? ('failed' as const) : ('done' as const),
        trigger: 'manual',
        workflow_id: null,
        started_at: start,
      })),
    )
    .execute();
  await t.db.insertInto('job_watermarks').values({ job, watermark: end, updated_at: end }).execute();
  // Two bad orders in the window (no amount, a negative one).
  await t.db
    .withSchema(DEMO_SCHEMA)
    .insertInto('orders')
    .values([
      { order_key: 'q-none', placed_at: new Date(start.getTime() + 120_000), amount: null },
      { order_key: 'q-neg', placed_at: new Date(start.getTime() + 180_000), amount: -2 },
    ])
    .execute();
  const quarantine = (generation: number, record_key: string) =>
    t.db
      .insertInto('quarantine')
      .values({ job, window_start: start, generation, record_key, reason: 'bad', payload: '{}' })
      .execute();
  const check = () => checkInvariants(t.db, job, windows, { emails: [], chat: [] });
  const lostOne = await check();
  assert.deepEqual(lostOne.lost, [`quarantine ${wkey} generation 0: q-neg, q-none never set aside`]);
  await quarantine(0, 'q-none');
  await quarantine(0, 'q-neg');
  await quarantine(0, 'q-other');
  assert.deepEqual((await check()).other, [
    `quarantine ${wkey} generation 0: q-other set aside, not a bad record`,
  ]);
  await t.db.deleteFrom('quarantine').where('record_key', '=', 'q-other').execute();
  assert.deepEqual(
    violations(await check()).filter((v) => v.startsWith('quarantine')),
    [],
  );
  // An older done generation set aside what was bad when it ran: a bad order that came later is
  // the newer generation's to set aside, not a loss of the older one's.
  await t.db
    .withSchema(DEMO_SCHEMA)
    .insertInto('orders')
    .values({ order_key: 'q-late', placed_at: new Date(start.getTime() + 240_000), amount: null })
    .execute();
  await t.db.updateTable('job_windows').set({ status: 'done' }).where('job', '=', job).execute();
  await quarantine(1, 'q-none');
  await quarantine(1, 'q-neg');
  assert.deepEqual((await check()).lost, [`quarantine ${wkey} generation 1: q-late never set aside`]);
  await quarantine(1, 'q-late');
  assert.deepEqual(
    violations(await check()).filter((v) => v.startsWith('quarantine')),
    [],
  );
  await t.db.deleteFrom('quarantine').where('job', '=', job).where('generation', '=', 1).execute();
  await t.db.withSchema(DEMO_SCHEMA).deleteFrom('orders').where('order_key', '=', 'q-late').execute();
  await t.db
    .updateTable('job_windows')
    .set({ status: 'failed' })
    .where('job', '=', job)
    .where('generation', '=', 1)
    .execute();
  // Generation 1 failed: whatever it set aside was rolled back with it.
  await quarantine(1, 'q-none');
  const leftOver = await check();
  assert.deepEqual(leftOver.other, [
    `quarantine ${wkey} generation 1: 1 record set aside by a generation that is not done (failed)`,
  ]);
});

test('a backup window: one row, its object as recorded, its drill recorded once, no scratch left', async () => {
  const job = 'inv-backup';
  const w0 = { start, end };
  const w1 = { start: end, end: new Date(end.getTime() + 3_600_000) };
  const key0 = `${job}/2015-01-01T00:00:00Z`;
  const key1 = `${job}/2015-01-01T01:00:00Z`;
  const dir = await mkdtemp(join(tmpdir(), 'inv-backup-'));
  const scratch = `inv_scratch_${process.pid}`;
  const layout = {
    dir,
    prefix: `${job}/`,
    drillEvery: 1,
    scratchDatabase: scratch,
    tableCounts: { 'public.items': 300 },
  };
  const noSinks = { emails: [], chat: [] };
  const check = (ws = [w0]) => checkBackupInvariants(t.db, job, ws, noSinks, layout);
  try {
    await t.db
      .insertInto('job_windows')
      .values({
        job,
        window_start: start,
        window_end: end,
        window_key: key0,
        status: 'done',
        trigger: 'scheduled',
        workflow_id: null,
        started_at: start,
      })
      .execute();
    await t.db.insertInto('job_watermarks').values({ job, watermark: end, updated_at: end }).execute();
    // Done, and nothing of it recorded: the backup is lost.
    assert.deepEqual((await check()).lost, [`backup ${key0}: window done, no backups row`]);

    const body = Buffer.from('a dump');
    const object = `${job}/20150101T000000Z.dump`;
    await mkdir(join(dir, job), { recursive: true });
    await writeFile(join(dir, object), body);
    await t.db
      .insertInto('backups')
      .values({
        job,
        window_key: key0,
        window_start: start,
        destination: `directory ${dir}`,
        object_key: object,
        bytes: body.length,
        sha256: createHash('sha256').update(body).digest('hex'),
        encrypted: false,
        key_id: null,
        dumped_at: start,
        table_counts: JSON.stringify({ 'public.items': 300 }),
        restore_checked: true,
      })
      .execute();
    // Its drill never recorded: neither passed nor failed is not an outcome.
    assert.deepEqual((await check()).lost, [`drill ${key0}: window done, its drill never recorded`]);
    const drill = () =>
      t.db
        .insertInto('backup_checks')
        .values({
          job,
          window_key: key0,
          kind: 'drill',
          trigger: 'schedule',
          ok: true,
          detail: 'restored',
          duration_ms: 5,
        })
        .execute();
    await drill();
    assert.deepEqual(violations(await check()), []);
    await drill();
    assert.deepEqual((await check()).duplicates, [`drill ${key0}: recorded 2 times`]);
    await t.db.deleteFrom('backup_checks').where('job', '=', job).execute();
    await drill();

    // An object no row names (a second copy), one left staged, one not as recorded.
    await writeFile(join(dir, `${job}/20150101T000000Z.dump.copy`), body);
    await mkdir(join(dir, '.staging', job), { recursive: true });
    await writeFile(join(dir, '.staging', `${job}/20150101T010000Z.dump`), body);
    const extra = await check();
    assert.deepEqual(extra.duplicates, [
      `backup object ${job}/20150101T000000Z.dump.copy: in the destination, no backups row names it`,
    ]);
    assert.deepEqual(extra.other, [`backup object ${job}/20150101T010000Z.dump: left staged`]);
    await rm(join(dir, `${job}/20150101T000000Z.dump.copy`));
    await rm(join(dir, '.staging'), { recursive: true });
    await writeFile(join(dir, object), 'another dump');
    assert.match((await check()).other.join('\n'), /12 bytes sha256 \w+, recorded 6 bytes/);
    await rm(join(dir, object));
    assert.deepEqual((await check()).lost, [
      `backup object ${object} (${key0}): live, missing from the destination`,
    ]);
    await writeFile(join(dir, object), body);
    assert.deepEqual(violations(await check()), []);

    // A scratch database the drill left behind.
    await sql`create database ${sql.id(scratch)}`.execute(t.db);
    assert.deepEqual((await check()).other, [
      `scratch database ${scratch}: left behind once the drills settled`,
    ]);
    await sql`drop database ${sql.id(scratch)}`.execute(t.db);

    // The next window failed (its drill, say) with no incident open: lost, never silently nothing.
    await t.db
      .insertInto('job_windows')
      .values({
        job,
        window_start: w1.start,
        window_end: w1.end,
        window_key: key1,
        status: 'failed',
        trigger: 'scheduled',
        workflow_id: null,
        started_at: w1.start,
      })
      .execute();
    assert.deepEqual((await check([w0, w1])).lost, [`window ${key1}: failed and no open incident`]);
  } finally {
    await sql`drop database if exists ${sql.id(scratch)}`.execute(t.db);
    await rm(dir, { recursive: true, force: true });
  }
});

test('a watermark off the end of the done prefix is found, and a missing one where a tick ran', async () => {
  const job = 'watermarked';
  const noSinks = { emails: [], chat: [] };
  await t.db
    .insertInto('job_windows')
    .values({
      job,
      window_start: start,
      window_end: end,
      window_key: `${job}/2015-01-01T00:00:00Z`,
      status: 'done',
      trigger: 'manual',
      workflow_id: null,
      started_at: start,
    })
    .execute();
  assert.deepEqual((await checkInvariants(t.db, job, windows, noSinks)).other, [
    `watermark ${job}: missing, done prefix ends ${end.toISOString()}`,
  ]);
  assert.deepEqual((await checkInvariants(t.db, job, windows, noSinks, { watermark: false })).other, []);
  await t.db.insertInto('job_watermarks').values({ job, watermark: start, updated_at: start }).execute();
  assert.deepEqual((await checkInvariants(t.db, job, windows, noSinks)).other, [
    `watermark ${job}: ${start.toISOString()}, done prefix ends ${end.toISOString()}`,
  ]);
});
