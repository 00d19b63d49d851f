// What a backup job has published: its backups as the ledger records them (with each one's last
// verification), and the one a selection names (--key, --at, else the newest).
import { join } from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';

export interface BackupRecord {
  job: string;
  windowKey: string;
  windowStart: string;
  /** When the dump's snapshot was taken (for older backups: when the record was written). */
  dumpedAt: string;
  /** Where it is: "directory /x/y.dump" or "s3://bucket/key at host". */
  location: string;
  destination: string;
  objectKey: string;
  bytes: number;
  sha256: string;
  encrypted: boolean;
  keyId: string | null;
  tableCounts: Record<string, number>;
  lastVerification: { at: string; ok: boolean; detail: string; trigger: string } | null;
}

/** A backup that no selection names; the message lists what there is. */
export class BackupSelectionError extends Error {
  readonly code = 'BACKUP_SELECTION';
}

function location(destination: string, objectKey: string): string {
  if (destination.startsWith('directory ')) return join(destination.slice('directory '.length), objectKey);
  const s3 = /^s3:\/\/([^ ]+)( at .+)?$/.exec(destination);
  return s3 ? `s3://${s3[1]}/${objectKey}${s3[2] ?? ''}` : `${destination} ${objectKey}`;
}

export async function listBackups(
  db: Kysely<Database>,
  job: string,
  page: { limit?: number; after?: string } = {},
): Promise<BackupRecord[]> {
  let q = db
    .selectFrom('backups')
    .selectAll()
    .where('job', '=', job)
    .where('deleted_at', 'is', null)
    .orderBy('window_start', 'desc');
  // Older than the backup of window `after` (a page of the list, newest first).
  if (page.after !== undefined)
    q = q.where('window_start', '<', (eb) =>
      eb
        .selectFrom('backups')
        .select('window_start')
        .where('job', '=', job)
        .where('window_key', '=', page.after!)
        .limit(1),
    );
  if (page.limit !== undefined) q = q.limit(page.limit);
  const rows = await q.execute();
  const keys = rows.map((r) => r.window_key);
  const checks = keys.length
    ? await db
        .selectFrom('backup_checks')
        .distinctOn('window_key')
        .select(['window_key', 'at', 'ok', 'detail', 'trigger'])
        .where('job', '=', job)
        .where('kind', '=', 'verify')
        .where('window_key', 'in', keys)
        .orderBy('window_key')
        .orderBy('at', 'desc')
        .execute()
    : [];
  const last = new Map(checks.map((c) => [c.window_key, c]));
  return rows.map((r) => {
    const v = last.get(r.window_key);
    return {
      job: r.job,
      windowKey: r.window_key,
      windowStart: r.window_start.toISOString(),
      dumpedAt: (r.dumped_at ?? r.created_at).toISOString(),
      location: location(r.destination, r.object_key),
      destination: r.destination,
      objectKey: r.object_key,
      bytes: Number(r.bytes),
      sha256: r.sha256,
      encrypted: r.encrypted,
      keyId: r.key_id,
      tableCounts: r.table_counts as Record<string, number>,
      lastVerification: v ? { at: v.at.toISOString(), ok: v.ok, detail: v.detail, trigger: v.trigger } : null,
    };
  });
}

/** --key (a window key or an object key), --at (the newest dumped at or before), else the newest. */
export async function pickBackup(
  db: Kysely<Database>,
  job: string,
  sel: { at?: Date; key?: string },
): Promise<BackupRecord> {
  const all = await listBackups(db, job);
  if (all.length === 0)
    throw new BackupSelectionError(
      `job ${job} has no published backups (a window publishes one when it ran)`,
    );
  const known = () =>
    `; the newest: ${all
      .slice(0, 5)
      .map((b) => `${b.windowKey} (dumped ${b.dumpedAt})`)
      .join(', ')} (tidemark backups list ${job})`;
  if (sel.key) {
    const b = all.find((x) => x.windowKey === sel.key || x.objectKey === sel.key);
    if (!b) throw new BackupSelectionError(`job ${job} has no backup with key ${sel.key}${known()}`);
    return b;
  }
  if (sel.at) {
    const b = all
      .filter((x) => Date.parse(x.dumpedAt) <= sel.at!.getTime())
      .sort((x, y) => Date.parse(y.dumpedAt) - Date.parse(x.dumpedAt))[0];
    if (!b)
      throw new BackupSelectionError(
        `job ${job} has no backup dumped at or before ${sel.at.toISOString()}${known()}`,
      );
    return b;
  }
  return all[0]!;
}
