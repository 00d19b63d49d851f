// The ledger's record of each check of a backup (backup_checks): a verification or a drill, what
// started it, its verdict and what it found.
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { BackupRecord } from './listing.js';

export async function record(
  db: Kysely<Database>,
  rec: BackupRecord,
  kind: 'verify' | 'drill',
  trigger: string,
  ok: boolean,
  detail: string,
  durationMs: number,
): Promise<void> {
  await db
    .insertInto('backup_checks')
    .values({ job: rec.job, window_key: rec.windowKey, kind, trigger, ok, detail, duration_ms: durationMs })
    .execute();
}
