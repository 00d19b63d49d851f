// The one job catalog. Worker, schedule sync, CLI and dashboard all read this list; adding a
// job is one entry here (and its kind's file, when it is a new kind). The entries below are the
// demo instances `npm start` runs.
import { join, resolve } from 'node:path';
import { type Catalog } from '../schedules/job.js';
import { defineCatalog } from '../schedules/define.js';
import { localDestination } from './backup/destination.js';
import { databaseBackup } from './backup/index.js';
import { dataSync } from './data-sync.js';
import { demoMigrations } from './demo-migrations/index.js';
import { demoTable } from './demo-schema.js';
import { seedCrm, seedEvents, seedFiles, seedPrices } from './demo.js';
import { eventRollup } from './event-rollup.js';
import { withHousekeeping, type HousekeepingSettings } from './housekeeping/index.js';
import { maintenance } from './maintenance/index.js';
import { marketplacePush } from './marketplace.js';
import { report } from './report/index.js';
import { salesReportChart, salesReportColumns, salesReportQuery } from './sales-report.js';
import { salesSummary } from './sales-summary.js';

/** The database next to DATABASE_URL's, with a suffix: the demo CRM, the restore-check scratch. Its
 *  query (sslmode, sslrootcert, sslcert, sslkey, ...) stays: the sibling is on the same server. */
export function sibling(url: string, suffix: string): string {
  const u = new URL(url);
  u.pathname = `${u.pathname}${suffix}`;
  return u.toString();
}

/** The settings the demo catalog reads; config/env.ts's Config has them (config/catalog-source.ts passes it). */
export interface DemoSettings extends HousekeepingSettings {
  readonly DATABASE_URL: string;
  /** The ledger's schema (db/ledger-schema.ts): the backup counts its job_windows. */
  readonly TIDEMARK_SCHEMA: string;
  readonly TIDEMARK_DEMO_MARKETPLACE_URL: string;
}

export function buildCatalog(config: DemoSettings): Catalog {
  const stateDir = resolve(config.TIDEMARK_STATE_DIR);
  return withHousekeeping(catalog(config, stateDir), config);
}

function catalog(config: DemoSettings, stateDir: string): Catalog {
  const crmUrl = sibling(config.DATABASE_URL, '_demo_crm');
  return defineCatalog(
    [
      salesSummary({
        name: 'sales-hourly',
        description: 'Hourly sales into the per-day summary (the worked example)',
        grid: '1h',
        timezone: 'Europe/Berlin',
        lateness: '5m',
        maxCatchUp: 24,
        seedOrdersPerHour: 40,
      }),
      salesSummary({
        name: 'sales-minutely',
        description: 'The same job on a one-minute grid, so the demo shows ticks at once',
        grid: '1m',
        lateness: '10s',
        maxCatchUp: 10,
      }),
      report({
        name: 'sales-daily-report',
        description: "Yesterday's sales by hour, e-mailed as a table, chart and CSV",
        title: 'Daily sales',
        recipients: ['finance@localhost'],
        grid: 'day',
        timezone: 'Europe/Berlin',
        lateness: '30m',
        maxCatchUp: 7,
        columns: salesReportColumns,
        valueColumn: 'revenue',
        chart: salesReportChart,
        query: salesReportQuery,
      }),
      {
        ...dataSync({
          name: 'customer-sync',
          description: 'Customers from the demo CRM database into crm_copy.customers',
          grid: '15m',
          lateness: '1m',
          maxCatchUp: 96,
          source: {
            url: crmUrl,
            table: 'public.customers',
            key: 'id',
            columns: ['name', 'email'],
            updatedAt: 'updated_at',
            deletedAt: 'deleted_at',
          },
          targets: [{ table: 'crm_copy.customers' }],
        }),
        seed: seedCrm(crmUrl),
      },
      {
        ...databaseBackup({
          name: 'db-backup',
          description: 'Nightly pg_dump of the tidemark database into .tidemark/backups',
          grid: 'day',
          timezone: 'Europe/Berlin',
          lateness: '10m',
          database: config.DATABASE_URL,
          destination: localDestination(join(stateDir, 'backups')),
          retention: { daily: 7, weekly: 4, monthly: 6 },
          tables: [demoTable('orders'), demoTable('daily_sales'), `${config.TIDEMARK_SCHEMA}.job_windows`],
          // Encrypted at rest when TIDEMARK_DEMO_BACKUP_KEYS holds keys ("k1:<base64 of 32 bytes>").
          ...(process.env.TIDEMARK_DEMO_BACKUP_KEYS
            ? { encryption: { env: 'TIDEMARK_DEMO_BACKUP_KEYS' } }
            : {}),
          restoreCheck: { every: 7, scratchDatabaseUrl: sibling(config.DATABASE_URL, '_restore_check') },
        }),
      },
      {
        ...marketplacePush({
          name: 'marketplace-prices',
          description: 'Prices and stock to the demo shop (a simulator npm start runs)',
          grid: '15m',
          lateness: '1m',
          maxCatchUp: 96,
          marketplaces: [{ name: 'demo-shop', url: config.TIDEMARK_DEMO_MARKETPLACE_URL, batchSize: 20 }],
        }),
        seed: seedPrices,
      },
      {
        ...eventRollup({
          name: 'nightly-rollup',
          description: 'Raw events into daily aggregates, only between 01:00 and 05:00 Berlin time',
          grid: 'day',
          timezone: 'Europe/Berlin',
          lateness: '5m',
          chunkSize: 5_000,
          allowedHours: { from: '01:00', to: '05:00' },
        }),
        seed: seedEvents,
      },
      {
        ...maintenance({
          name: 'housekeeping',
          description: 'Rotates .tidemark/logs/demo.log, clears old files from .tidemark/tmp',
          grid: 'day',
          timezone: 'Europe/Berlin',
          lateness: '15m',
          logs: [{ dir: join(stateDir, 'logs'), file: 'demo.log', keep: 7 }],
          temp: [{ dir: join(stateDir, 'tmp'), maxAgeMs: 7 * 86_400_000 }],
        }),
        seed: seedFiles(stateDir),
      },
    ],
    // The demo's tables, in their own schema (tidemark_demo): made only where the demo runs.
    { migrations: demoMigrations },
  );
}
