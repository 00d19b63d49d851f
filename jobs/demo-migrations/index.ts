// The demo catalog's own migrations (run by `tidemark migrate` and at a worker's start after the
// ledger's, only where the demo catalog runs). Append-only, like every catalog's.
import type { CatalogMigrations } from '../../schedules/job.js';
import * as demoTables from './20261204T1000_demo_tables.js';

export const demoMigrations: CatalogMigrations = Object.freeze({
  '20261204T1000_demo_tables': demoTables,
});
