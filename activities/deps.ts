// What every activity is built from. Entry points build these; tests hand in their own.
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Catalog, Job } from '../schedules/job.js';
import type { ActivityPolicy } from '../workflows/types.js';
import type { Logger } from './logger.js';

export interface ActivityDeps {
  readonly db: Kysely<Database>;
  readonly catalog: Catalog;
  readonly logger: Logger;
  /** The wall clock; tests may pin it. */
  readonly now: () => Date;
}

export function policyOf(job: Job): ActivityPolicy {
  return { retry: { ...job.retry }, startToCloseTimeoutMs: job.attemptTimeoutMs };
}
