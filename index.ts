// The public entry of the tidemark package: define jobs and a catalog, the job kinds that come
// with it, the handler context types, and the entry points the `tidemark` command runs.
// Named re-exports only: this list is the package's API.
import type { CliIO } from './cli/context.js';

// Jobs and the catalog.
export {
  type Catalog,
  type Job,
  type JobSpec,
  type JobSeeder,
  type RetrySpec,
  type Tick,
} from './schedules/job.js';
export { defineJob, defineCatalog, JobDefinitionError, UnknownJobError } from './schedules/define.js';
export { CatalogSourceError, catalogPath, loadCatalog, CONFIG_FILES } from './config/catalog-source.js';
export { loadConfig, ConfigError, type Config } from './config/env.js';
export { describeTemporal, resolveTemporal, type TemporalSettings } from './config/temporal.js';
// connectTemporalClient, connectTemporalWorker and TemporalConnectError: from 'tidemark/temporal' (temporal.ts).
export { buildCatalog as demoCatalog } from './jobs/catalog.js';

// What a handler receives and returns.
export type {
  WindowContext,
  WindowCounts,
  WindowEffect,
  EffectRetry,
  WindowHandler,
  WindowPreparer,
  WindowScope,
  WindowSettler,
} from './schedules/job.js';
export type { Window, Grid } from './schedules/windows.js';
export type { Database } from './db/schema.js';
/** kysely's sql template, for a handler's statements inside its window transaction (`ctx.trx`). */
export { sql } from 'kysely';
// For job authors' tests: one window of a job on a database, as a worker runs it, effects not performed.
export { runWindowOnce, type WindowRunReport } from './testing/run-window.js';

// Job kinds.
export { salesSummary, summariseWindow, type SalesSummaryOptions } from './jobs/sales-summary.js';
export { report, type ReportOptions } from './jobs/report/index.js';
export { dataSync, type DataSyncOptions, type SyncSource, type SyncTarget } from './jobs/data-sync.js';
export { databaseBackup, type BackupOptions } from './jobs/backup/index.js';
export { localDestination } from './jobs/backup/destination.js';
export { marketplacePush, type Marketplace, type MarketplaceOptions } from './jobs/marketplace.js';
export { eventRollup, type EventRollupOptions } from './jobs/event-rollup.js';
export { maintenance, type MaintenanceOptions } from './jobs/maintenance/index.js';
export {
  housekeeping,
  HOUSEKEEPING_JOB,
  DEFAULT_RETENTION as HOUSEKEEPING_DEFAULT_RETENTION,
  type HousekeepingOptions,
} from './jobs/housekeeping/index.js';

// Entry points: what `tidemark worker | web | slack | dev | <command>` runs, loaded only when
// called, so that a catalog module importing this entry does not load a worker or the Slack app.
export const runWorker = async (): Promise<void> => (await import('./workers/worker.js')).runWorker();
export const runWeb = async (): Promise<void> => (await import('./web/main.js')).runWeb();
export const runSlack = async (): Promise<void> => (await import('./slack/main.js')).runSlack();
export const runDev = async (): Promise<void> => (await import('./bin/dev.js')).runDev();
/** Runs one `tidemark` command line (`sync`, `jobs`, ...); returns its exit code. */
export const runCli = async (argv: string[], io: CliIO): Promise<number> =>
  (await import('./cli/main.js')).run(argv, io);
export type { CliIO } from './cli/context.js';
