// An incident and its alert deliveries are recorded together or not at all. Found by the fault
// suite (a pg-terminate / partition round): the incident was opened, the connection died before
// its deliveries were recorded, and every retry found the incident already open with nothing
// to deliver: an effect in doubt that nobody was ever told about. Likewise a recovery notice.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { alerting } from '../../../activities/alerts.js';
import { raiseNow, resolveNow } from '../../../activities/direct-alerts.js';
import { memoryLogger } from '../../../activities/logger.js';
import { defineCatalog } from '../../../schedules/define.js';
import { createTestDb, tm, type TestDb } from '../../helpers/db.js';
import { salesJob } from '../../helpers/jobs.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
  // When armed, the next insert of an alert delivery fails, as a connection cut between statements
  // would. A sequence, not a table, counts: its step survives the rollback that the failure causes.
  await sql`create sequence public.cut_seq start 1`.execute(t.db);
  await sql`select nextval('public.cut_seq')`.execute(t.db);
  await sql`
    create function public.cut_alert() returns trigger language plpgsql as $$
    begin
      if new.effect_key like 'alert:%' and nextval('public.cut_seq') = 1 then
        raise exception 'connection cut before the alert deliveries were recorded';
      end if;
      return new;
    end $$`.execute(t.db);
  await sql`create trigger cut_alert before insert on ${tm.effects} for each row execute function public.cut_alert()`.execute(
    t.db,
  );
});
after(async () => t?.drop());

const armCut = () => sql`select setval('public.cut_seq', 1, false)`.execute(t.db);

function alerts() {
  return alerting({
    db: t.db,
    catalog: defineCatalog([salesJob('atomic', { alerts: { telegram: ['ops-chat'] } })]),
    logger: memoryLogger(),
    now: () => new Date(),
  });
}

test('a raise cut after opening its incident is retried whole: the incident opens once, with its alert', async () => {
  const { activities } = alerts();
  const input = {
    job: 'atomic',
    subject: 'atomic/2026-05-01T10:00:00Z:report',
    kind: 'effect-unknown' as const,
    error: 'outcome unknown',
  };
  await armCut();
  await assert.rejects(activities.raiseIncident(input), /connection cut/);
  const retried = await activities.raiseIncident(input);
  assert.deepEqual(retried.deliveries, [`alert:${retried.incidentId}:opened:telegram:ops-chat`]);
  const incidents = await t.db
    .selectFrom('incidents')
    .select(['id'])
    .where('subject', '=', input.subject)
    .execute();
  assert.equal(incidents.length, 1);
});

test('a resolve cut after closing its incident is retried whole: the recovery notice is recorded once', async () => {
  const { activities } = alerts();
  const subject = 'atomic/2026-05-01T11:00:00Z';
  const raised = await activities.raiseIncident({
    job: 'atomic',
    subject,
    kind: 'window-failed',
    error: 'boom',
  });
  await armCut();
  await assert.rejects(
    activities.resolveIncident({ job: 'atomic', subject, note: 'fixed' }),
    /connection cut/,
  );
  const resolved = await activities.resolveIncident({ job: 'atomic', subject, note: 'fixed' });
  assert.deepEqual(resolved?.deliveries, [`alert:${raised.incidentId}:closed:telegram:ops-chat`]);
});

test('with no alert channel configured, an incident that opens is an ERROR line; its closing (a retry, a recovery) only a warning', async () => {
  const logger = memoryLogger();
  const deps = {
    db: t.db,
    catalog: defineCatalog([salesJob('unheard')]),
    logger,
    now: () => new Date(),
  };
  await raiseNow(deps, {
    job: 'unheard',
    subject: 'unheard:effect',
    kind: 'effect-failed',
    error: 'the API said 400',
  });
  await resolveNow(deps, { job: 'unheard', subject: 'unheard:effect', note: 'retried by alice' });
  const said = logger.entries.filter((e) => /no alert channels configured/.test(e.message));
  assert.deepEqual(
    said.map((e) => [e.level, / (opened|closed): /.exec(e.message)?.[1]]),
    [
      ['error', 'opened'],
      ['warn', 'closed'],
    ],
  );
});
