// A PostgreSQL restart between an effect's provider call and its done marker (review of issue 9).
// The attempt KNOWS the provider took the effect: losing that knowledge to a short database
// outage must not turn the effect into an unknown one (policy `ask`: an operator is asked about
// a message that certainly went out) nor send it again (policy `resend`, which every alert has:
// the person on call gets the alert twice). Driven against a private PostgreSQL cluster that is
// really restarted, and a recording Telegram API on loopback; attempts are retried as Temporal
// would (the failure's own retry delay, else a short one).
import { demoMigrations } from '../../../jobs/demo-migrations/index.js';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { after, before, test } from 'node:test';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { MockActivityEnvironment } from '@temporalio/testing';
import { startPgCluster, type PgCluster } from '../../../chaos/pg-cluster.js';
import type { ActivityDeps } from '../../../activities/deps.js';
import { effectActivities, type EffectResult } from '../../../activities/effects.js';
import { createDb, ensureDatabase, migrateAll } from '../../../db/database.js';
import { recordEffects } from '../../../db/effects.js';
import type { Database, EffectPolicy } from '../../../db/schema.js';
import { defineCatalog } from '../../../schedules/define.js';
import { startChat, type TestChat } from '../../helpers/chat.js';
import { chatTexts, depsWithChannels, effectAttempts, effectRow } from '../../helpers/effects.js';
import { salesJob } from '../../helpers/jobs.js';
import { startSmtp, type TestSmtp } from '../../helpers/smtp.js';

let cluster: PgCluster;
let db: Kysely<Database>;
let smtp: TestSmtp;
let chat: TestChat;
before(async () => {
  [cluster, smtp, chat] = await Promise.all([
    startPgCluster({ listen: ['127.0.0.1'] }),
    startSmtp(),
    startChat(),
  ]);
  const url = cluster.url('tidemark_done_marker');
  await ensureDatabase(url);
  db = createDb(url, { max: 4 });
  await migrateAll(db, demoMigrations);
});
after(async () => {
  await db?.destroy();
  await smtp?.close();
  await chat?.close();
  await cluster?.destroy();
});

const catalog = defineCatalog([salesJob('outage', { alerts: { telegram: ['ops-chat'] } })]);
/** Each attempt (and so each lease) lasts this long. */
const ATTEMPT_MS = 3_000;
const MAX_ATTEMPTS = 20;

/** Whether a fresh connection to the cluster runs a query right now. */
async function serverAnswers(): Promise<boolean> {
  const client = new pg.Client({ connectionString: cluster.url(), connectionTimeoutMillis: 1_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Deps whose first provider call is followed by a PostgreSQL restart: the hook returns once the
 * server refuses connections, so the done marker is written while it is down. `restarted`
 * settles when the server is back.
 */
function depsWithOutage(): { deps: ActivityDeps; restarted: () => Promise<void> } {
  let restart: Promise<void> | undefined;
  const base = depsWithChannels(db, catalog, smtp, chat);
  const deps: ActivityDeps = {
    ...base,
    hooks: {
      afterEffect: async () => {
        if (restart) return;
        restart = cluster.restart('fast');
        const deadline = Date.now() + 30_000;
        while (await serverAnswers()) {
          if (Date.now() > deadline) throw new Error('the PostgreSQL restart never took the server down');
          await new Promise((r) => setTimeout(r, 20));
        }
      },
    },
  };
  return { deps, restarted: async () => await restart };
}

/** Runs performEffect attempt after attempt, as Temporal's retry policy would, until one returns. */
async function driveLikeTemporal(deps: ActivityDeps, key: string): Promise<EffectResult> {
  const errors: string[] = [];
  for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
    const env = new MockActivityEnvironment({ startToCloseTimeoutMs: ATTEMPT_MS, attempt });
    try {
      return (await env.run(effectActivities(deps).performEffect, { key })) as EffectResult;
    } catch (err) {
      if (err instanceof ApplicationFailure && err.nonRetryable) throw err;
      errors.push((err as Error).message);
      const delay =
        err instanceof ApplicationFailure ? (err.nextRetryDelay as number | undefined) : undefined;
      await new Promise((r) => setTimeout(r, delay ?? 300));
    }
  }
  throw new Error(`performEffect never returned in ${MAX_ATTEMPTS} attempts: ${inspect(errors)}`);
}

async function recordTelegram(key: string, policy: EffectPolicy, text: string): Promise<void> {
  await recordEffects(db, [
    {
      key,
      job: 'outage',
      windowKey: null,
      name: policy === 'resend' ? 'alert-opened' : 'notify',
      channel: 'telegram',
      policy,
      request: { chatId: 'ops-chat', text },
      providerKey: key,
    },
  ]);
}

test('policy ask: a message the provider accepted is done after a PostgreSQL restart hid its done marker, not unknown', async () => {
  const key = 'outage/ask:notify';
  const text = 'weekly figures (ask)';
  await recordTelegram(key, 'ask', text);
  const { deps, restarted } = depsWithOutage();
  const r = await driveLikeTemporal(deps, key);
  await restarted();
  assert.equal(chatTexts(chat, 'telegram').filter((t) => t === text).length, 1, 'sent once');
  const row = await effectRow(db, key);
  assert.equal(
    row.status,
    'done',
    `the attempt saw the provider accept it, so it is done, not left for an operator to guess: ${inspect({ r, row, attempts: await effectAttempts(db, key) })}`,
  );
  assert.equal(r.outcome, 'done');
});

test('policy resend (every alert): a PostgreSQL restart between the send and its done marker does not send the alert twice', async () => {
  const key = 'alert:1:opened:telegram:ops-chat';
  const text = 'outage: window failed (resend)';
  await recordTelegram(key, 'resend', text);
  const { deps, restarted } = depsWithOutage();
  const r = await driveLikeTemporal(deps, key);
  await restarted();
  const sent = chatTexts(chat, 'telegram').filter((t) => t === text).length;
  assert.equal(
    sent,
    1,
    `the alert went out ${sent} times: ${inspect({ r, attempts: await effectAttempts(db, key) })}`,
  );
  assert.equal((await effectRow(db, key)).status, 'done');
});
