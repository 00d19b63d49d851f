// The independent checker (test/helpers/invariants.ts) against hand-made ledger states: a done
// window whose effect was never recorded must count as a lost effect, not pass silently.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ParsedMail } from 'mailparser';
import { recordEffects } from '../../../db/effects.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { checkInvariants, violations } from '../../helpers/invariants.js';

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
  const emails = [{ subject: `report ${key}` } as ParsedMail];
  const ok = await checkInvariants(
    t.db,
    JOB,
    windows,
    { emails, chat: [] },
    { effectsPerWindow: ['report'] },
  );
  assert.deepEqual(violations(ok), []);
});
