// What the page's routes are built from: injected, so a test gives its own database, client and clock.
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Config } from '../config/env.js';
import type { Database } from '../db/schema.js';
import type { Catalog } from '../schedules/job.js';
import { isoUtc } from '../contract/window-key.js';
import { overviewRows } from '../operator/job-health.js';
import { overviewSchedules } from './overview-schedules.js';

export interface WebDeps {
  db: Kysely<Database>;
  client: Client;
  catalog: Catalog;
  config: Config;
  /** The clock (sessions, "not closed yet", lag); default the system clock. */
  now: () => Date;
  /** The overview as the page shows it: every job's row, the pending approvals. */
  overview: () => Promise<Overview>;
  /** A person changed the job's schedule from the page: the overview reads it exactly for a while. */
  scheduleChanged: (job: string) => void;
}

export interface Overview {
  jobs: ({ job: string } & Record<string, unknown>)[];
  approvals: Record<string, unknown>[];
  webUi: string;
}

/** The page's dependencies from its parts: the overview reads the schedules as overviewSchedules says. */
export function webDeps(o: Omit<WebDeps, 'overview' | 'scheduleChanged'>): WebDeps {
  const schedules = overviewSchedules(
    o.client,
    o.catalog.jobs.map((j) => j.name),
  );
  const overview = async (): Promise<Overview> => {
    const [jobs, approvals] = await Promise.all([
      // The listing of the schedules and the statements at once.
      overviewRows(o.db, o.client, o.catalog, o.now(), { schedules: schedules.read() }),
      o.db
        .selectFrom('rerun_requests')
        .selectAll()
        .where('status', '=', 'pending')
        .orderBy('requested_at')
        .execute(),
    ]);
    return {
      jobs,
      approvals: approvals.map((a) => ({
        request: a.workflow_id,
        job: a.job,
        window: isoUtc(a.window_start),
        generation: a.generation,
        by: a.requested_by,
        reason: a.reason,
      })),
      webUi: `${o.config.TIDEMARK_WEB_UI_URL}/namespaces/${o.config.TEMPORAL_NAMESPACE}/workflows`,
    };
  };
  return { ...o, overview, scheduleChanged: (job) => schedules.changed(job) };
}
