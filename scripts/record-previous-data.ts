// Records test/fixtures/previous-data.sql: data written by this release's own code (a real worker on
// a real Temporal dev server and PostgreSQL), for the test that migrates it to a later release.
// Run it on the release's commit, once per release:  node --import tsx scripts/record-previous-data.ts
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrations } from '../db/migrations/index.js';
import { previousRelease } from '../db/migrations/releases.js';
import { readWatermark } from '../db/ledger.js';
import { schemaOf } from '../db/ledger-schema.js';
import { createTestDb } from '../test/helpers/db.js';
import { depsWithChannels } from '../test/helpers/effects.js';
import { insertOrders, ordersBetween } from '../test/helpers/jobs.js';
import {
  BACKUP,
  BROKEN,
  DAY,
  failing,
  FIXTURE,
  previousCatalog,
  SALES,
  SALES_WATERMARK,
} from '../test/helpers/previous-data.js';
import { approvedRerun } from '../test/helpers/reruns.js';
import { startChat } from '../test/helpers/chat.js';
import { startSmtp } from '../test/helpers/smtp.js';
import {
  eventually,
  startTemporal,
  tickAt,
  uniqueQueue,
  windowByHand,
  withWorker,
} from '../test/helpers/temporal.js';

async function main(): Promise<void> {
  const last = Object.keys(migrations).at(-1);
  if (last !== previousRelease().last)
    throw new Error(
      `this checkout's last migration is ${last}, the release point is ${previousRelease().last}: ` +
        'run the script on the release commit (git worktree add /tmp/rel <release commit>)',
    );
  const backupDir = mkdtempSync(join(tmpdir(), 'tidemark-prev-backup-'));
  const [env, t, smtp, chat] = await Promise.all([startTemporal(), createTestDb(), startSmtp(), startChat()]);
  try {
    const catalog = previousCatalog(t.url, backupDir);
    const deps = depsWithChannels(t.db, catalog, smtp, chat);
    const taskQueue = uniqueQueue('record-previous');
    const client = env.client;
    // Orders over 00:00-07:00, every 9th without an amount (quarantined).
    await insertOrders(t.db, ordersBetween('prev', `${DAY}T00:00:00Z`, `${DAY}T07:00:00Z`, 140, 9));
    await withWorker(env, taskQueue, deps, async () => {
      // 04:05: 00-03 closed; the 03:00 window fails (an incident opens, alerted by e-mail).
      failing.add(`${SALES}/${DAY}T03:00:00Z`);
      await tickAt(client, taskQueue, SALES, `${DAY}T04:05:00Z`);
      await tickAt(client, taskQueue, BROKEN, `${DAY}T01:05:00Z`);
      await eventually(
        async () =>
          (await t.db.selectFrom('job_windows').select('status').where('job', '=', BROKEN).executeTakeFirst())
            ?.status === 'failed' &&
          (await t.db.selectFrom('job_windows').select('status').where('job', '=', SALES).execute())
            .length === 4
            ? true
            : undefined,
        60_000,
        'the first ticks ended',
      );
      // 05:05: the 03:00 window recovers (its incident closes), 04:00 is done: watermark 05:00.
      failing.clear();
      await tickAt(client, taskQueue, SALES, `${DAY}T05:05:00Z`);
      await eventually(
        async () =>
          (await readWatermark(t.db, SALES))?.toISOString() === new Date(SALES_WATERMARK).toISOString()
            ? true
            : undefined,
        60_000,
        `the watermark of ${SALES} at ${SALES_WATERMARK}`,
      );
      // A rerun of 01:00, asked by alice and approved by bob: generation 1.
      await approvedRerun(client, taskQueue, SALES, `${DAY}T01:00:00Z`);
      // A backup of the day before.
      const backup = await windowByHand(
        client,
        taskQueue,
        BACKUP,
        '2026-03-01T00:00:00Z',
        `${DAY}T00:00:00Z`,
      );
      if (backup.outcome !== 'processed') throw new Error(`the backup window: ${backup.outcome}`);
      // Alerts delivered by now (the outbox drains within the worker).
      await eventually(
        async () =>
          (await t.db.selectFrom('incidents').select('closed_at').execute()).some((i) => i.closed_at) &&
          smtp.messages.length >= 2
            ? true
            : undefined,
        60_000,
        'an incident closed and its alerts sent',
      );
    });
    const dump = execFileSync(
      'pg_dump',
      [
        '--data-only',
        '--column-inserts',
        '--no-owner',
        `--exclude-table=${schemaOf(t.db)}.kysely_migration`,
        `--exclude-table=${schemaOf(t.db)}.kysely_migration_lock`,
        t.url,
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    );
    const header = `-- Data written by tidemark release ${previousRelease().name} (schema at ${last}); made by scripts/record-previous-data.ts.\n`;
    writeFileSync(FIXTURE, header + dump.replace(/^-- Dumped (from|by) .*\n/gm, ''));
    console.log(`wrote ${fileURLToPath(FIXTURE)}`);
  } finally {
    await Promise.allSettled([smtp.close(), chat.close()]);
    await t.drop();
    rmSync(backupDir, { recursive: true, force: true });
    await env.teardown();
  }
}

await main();
