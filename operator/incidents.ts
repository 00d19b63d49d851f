// Open incidents for the page: failures alerted and not yet cleared, oldest first.
import { PageCursorError } from './effects.js';
import type { Kysely } from 'kysely';
import { openIncidents } from '../db/effects.js';
import type { Database } from '../db/schema.js';
import { isoUtc } from '../contract/window-key.js';
import { urlsAsOrigins } from './shown.js';

export interface OpenIncident {
  id: string;
  job: string;
  /** What failed: a window's key, an effect's key, or the job's lag. */
  subject: string;
  kind: string;
  opened: string;
  occurrences: number;
  lastError: string;
}

export async function incidentsOpen(
  db: Kysely<Database>,
  job?: string,
  page: { limit?: number; after?: string } = {},
): Promise<OpenIncident[]> {
  if (page.after !== undefined) {
    const known = /^\d{1,18}$/.test(page.after)
      ? await db.selectFrom('incidents').select('id').where('id', '=', page.after).executeTakeFirst()
      : undefined;
    if (!known) throw new PageCursorError(`after: no incident "${page.after}"; start again without after`);
  }
  return (await openIncidents(db, job, page)).map((i) => ({
    id: i.id,
    job: i.job,
    subject: i.subject,
    kind: i.kind,
    opened: isoUtc(i.opened_at),
    occurrences: i.occurrences,
    lastError: urlsAsOrigins(i.last_error),
  }));
}
