// What the CLI and the page need to find a backup job's backups again: its database, where its
// backups are, its keys. Kept on the job's handler (what every entry in a catalog keeps of the
// job a databaseBackup(...) call made, spread and extended or not), under a registered symbol: a
// catalog module loaded on its own (through tsx, or from the package) has its own copy of this
// file, and the CLI must still find its jobs.
import type { Job, WindowHandler } from '../../schedules/job.js';
import type { Destination } from './destination.js';
import type { BackupKeys, BackupKeySource } from './keys.js';

export interface BackupJob {
  readonly name: string;
  /** postgres:// URL of the database the job backs up. */
  readonly database: string;
  readonly destination: Destination;
  readonly tables: readonly string[];
  readonly encryption?: BackupKeySource;
  /** The job's keys now (read at each call), or undefined for a job that does not encrypt. */
  keys(): BackupKeys | undefined;
  readonly drill?: { readonly every: number; readonly scratchDatabaseUrl: string };
}

const KEY = Symbol.for('tidemark.backup-job');

export function registerBackupJob(handler: WindowHandler, job: BackupJob): void {
  Object.defineProperty(handler, KEY, { value: job });
}

/** The backup job behind a catalog entry, or undefined for a job of another kind. */
export function backupJobOf(job: Job): BackupJob | undefined {
  return (job.handler as unknown as Record<symbol, BackupJob | undefined>)[KEY];
}

/** The subject of the incident a failed on-demand drill opens; the next passing drill (either kind) closes it. */
export const DRILL_SUBJECT = 'restore-drill';

/** How a window's failed drill begins its error (index.ts throws it; lastDrill finds it in the run record). */
export const DRILL_FAILED = 'restore drill failed:';
