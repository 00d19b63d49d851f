// What the CLI and the page need to find a backup job's backups again: its database, where its
// backups are, its keys. Kept by the job's handler (what every entry in a catalog keeps of the
// job a databaseBackup(...) call made, spread and extended or not).
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

const jobs = new WeakMap<WindowHandler, BackupJob>();

export function registerBackupJob(handler: WindowHandler, job: BackupJob): void {
  jobs.set(handler, job);
}

/** The backup job behind a catalog entry, or undefined for a job of another kind. */
export function backupJobOf(job: Job): BackupJob | undefined {
  return jobs.get(job.handler);
}

/** How a window's failed drill begins its error (index.ts throws it; lastDrill finds it in the run record). */
export const DRILL_FAILED = 'restore drill failed:';
