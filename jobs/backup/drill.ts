// The restore drill on demand, and a job's newest drill (on demand or a window's). A drill restores
// the newest backup into the job's scratch database, counts its rows and drops it again.
import type { Kysely } from 'kysely';
import { redactUrl } from '../../db/pg-connection.js';
import type { Database } from '../../db/schema.js';
import { record } from './backup-checks.js';
import { pickBackup, type BackupRecord } from './listing.js';
import { DRILL_FAILED, type BackupJob } from './registry.js';
import { restoreInto, type RestoreReport } from './restore.js';
import {
  databaseName,
  dropDatabase,
  exclusively,
  refuseSourceAsScratch,
  RestoreRefusedError,
} from './target.js';

export interface DrillReport extends RestoreReport {
  scratch: string;
}

/**
 * The restore drill on demand: the newest backup restored into the job's scratch database
 * (restoreCheck.scratchDatabaseUrl), counted and dropped; recorded either way.
 */
export async function runDrill(db: Kysely<Database>, bj: BackupJob, trigger: string): Promise<DrillReport> {
  if (!bj.drill)
    throw new RestoreRefusedError(
      `job ${bj.name} has no restoreCheck: give it restoreCheck: { every, scratchDatabaseUrl } in the catalog so a drill has a scratch database`,
    );
  const scratch = bj.drill.scratchDatabaseUrl;
  const name = databaseName(scratch);
  await refuseSourceAsScratch(bj.name, bj.database, scratch, db);
  for (let attempt = 1; ; attempt++) {
    const rec = await pickBackup(db, bj.name, {});
    const report = await exclusively(scratch, name, async (): Promise<RestoreReport> => {
      await dropDatabase(scratch, name);
      try {
        return await restoreInto(bj, rec, { into: scratch }, name, Date.now());
      } catch (err) {
        return {
          ok: false,
          backup: rec,
          target: redactUrl(scratch),
          created: false,
          counts: [],
          durationMs: 0,
          problem: (err as Error).message,
        };
      } finally {
        await dropDatabase(scratch, name).catch(() => undefined);
      }
    });
    // Retention removed the backup while the drill started (a window published a newer one): its
    // failure says nothing of the backups, and would open a false incident. Drill the newest again.
    if (!report.ok && attempt < 3 && (await removedSince(db, rec))) continue;
    const detail = report.ok
      ? `restored into ${name}, ${report.counts.length} table(s) counted as dumped, dropped`
      : report.problem!;
    await record(db, rec, 'drill', trigger, report.ok, detail, report.durationMs);
    return { ...report, scratch: redactUrl(scratch) };
  }
}

/** Whether a backup listed as live is deleted now (by retention) or gone from the ledger. */
async function removedSince(db: Kysely<Database>, rec: BackupRecord): Promise<boolean> {
  const row = await db
    .selectFrom('backups')
    .select('deleted_at')
    .where('job', '=', rec.job)
    .where('window_key', '=', rec.windowKey)
    .executeTakeFirst();
  return !row || row.deleted_at !== null;
}

/**
 * The job's newest drill: a recorded one (on demand, or a window's that passed), a window that
 * failed its drill (its transaction rolled back; the failure is in its run record and incident), or
 * a backup a window of the previous release drilled (restore_checked, recorded nowhere else: its
 * workers keep running while a new release rolls out, and a job drilled yesterday is not "never").
 */
export async function lastDrill(
  db: Kysely<Database>,
  job: string,
): Promise<{ at: string; ok: boolean; detail: string; windowKey: string; trigger: string } | null> {
  const recorded = await db
    .selectFrom('backup_checks')
    .select(['at', 'ok', 'detail', 'window_key', 'trigger'])
    .where('job', '=', job)
    .where('kind', '=', 'drill')
    .orderBy('at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const failed = await db
    .selectFrom('job_runs')
    .select(['finished_at', 'reason', 'window_start'])
    .where('job', '=', job)
    .where('kind', '=', 'window')
    .where('outcome', '=', 'failed')
    .where('reason', 'like', `${DRILL_FAILED}%`)
    .orderBy('finished_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const legacy = await db
    .selectFrom('backups as b')
    .select(['b.created_at', 'b.window_key'])
    .where('b.job', '=', job)
    .where('b.restore_checked', '=', true)
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom('backup_checks as c')
            .select('c.id')
            .whereRef('c.job', '=', 'b.job')
            .whereRef('c.window_key', '=', 'b.window_key')
            .where('c.kind', '=', 'drill'),
        ),
      ),
    )
    .orderBy('b.created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const found = [
    recorded && {
      at: recorded.at,
      ok: recorded.ok,
      detail: recorded.detail,
      windowKey: recorded.window_key,
      trigger: recorded.trigger,
    },
    failed && {
      at: failed.finished_at,
      ok: false,
      detail: failed.reason!.slice(DRILL_FAILED.length).trim(),
      windowKey: `${job}/${failed.window_start!.toISOString().replace('.000Z', 'Z')}`,
      trigger: 'schedule',
    },
    legacy && {
      at: legacy.created_at,
      ok: true,
      detail: 'restored into the scratch database and counted by the window (before drills were recorded)',
      windowKey: legacy.window_key,
      trigger: 'schedule',
    },
  ].filter((d) => !!d);
  // The newest of them; a tie goes to the recorded drill, then the failed window.
  const newest = found.reduce<(typeof found)[number] | undefined>(
    (a, d) => (!a || d.at > a.at ? d : a),
    undefined,
  );
  return newest ? { ...newest, at: newest.at.toISOString() } : null;
}
