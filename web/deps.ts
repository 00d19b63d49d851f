// What the page's routes are built from: injected, so a test gives its own database, client and clock.
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Config } from '../config/env.js';
import type { Database } from '../db/schema.js';
import type { Catalog } from '../schedules/job.js';

export interface WebDeps {
  db: Kysely<Database>;
  client: Client;
  catalog: Catalog;
  config: Config;
  /** The clock (sessions, "not closed yet", lag); default the system clock. */
  now: () => Date;
}
