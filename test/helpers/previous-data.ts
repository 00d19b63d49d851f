// The jobs behind test/fixtures/previous-data.sql: what scripts/record-previous-data.ts runs with
// the previous release's code, and what the data-migration test runs again with the current code.
import { localDestination } from '../../jobs/backup/destination.js';
import { databaseBackup } from '../../jobs/backup/index.js';
import { DEMO_SCHEMA } from '../../jobs/demo-schema.js';
import { type Catalog } from '../../schedules/job.js';
import { defineCatalog } from '../../schedules/define.js';
import { summaryWithMail } from './effects.js';
import { salesJob } from './jobs.js';

export const FIXTURE = new URL('../fixtures/previous-data.sql', import.meta.url);
/** An hourly sales job with an e-mail per window; its 03:00 window failed once, then recovered. */
export const SALES = 'prev-sales';
/** A job whose only window failed (its incident is still open). */
export const BROKEN = 'prev-broken';
export const BACKUP = 'prev-backup';
export const DAY = '2026-03-02';
/** The sales job's watermark in the fixture: the next window starts here. */
export const SALES_WATERMARK = `${DAY}T05:00:00Z`;

/** Whether a window should fail (the recording flips it); the current code's run never fails one. */
export const failing = new Set<string>();

/** The fixture's jobs; the backup job writes its dumps under `backupDir`. */
export function previousCatalog(databaseUrl: string, backupDir: string): Catalog {
  const mailed = summaryWithMail();
  return defineCatalog([
    salesJob(SALES, {
      start: `${DAY}T00:00:00Z`,
      alerts: { email: ['ops@example.test'] },
      retry: { maximumAttempts: 1 },
      handler: async (ctx) => {
        if (failing.has(ctx.key)) throw new Error(`upstream unavailable for ${ctx.key}`);
        return await mailed(ctx);
      },
    }),
    salesJob(BROKEN, {
      start: `${DAY}T00:00:00Z`,
      alerts: { email: ['ops@example.test'] },
      retry: { maximumAttempts: 1 },
      handler: async (ctx) => {
        throw new Error(`source table missing for ${ctx.key}`);
      },
    }),
    databaseBackup({
      name: BACKUP,
      grid: 'day',
      timezone: 'UTC',
      start: '2026-03-01T00:00:00Z',
      database: databaseUrl,
      destination: localDestination(backupDir),
      retention: { daily: 7, weekly: 0, monthly: 0 },
      tables: [`${DEMO_SCHEMA}.orders`],
    }),
  ]);
}
