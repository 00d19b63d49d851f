// `tidemark quarantine export`: a job's quarantined records as JSON Lines, to stdout or a file
// (written durably), read in pages by id. The records stay in the ledger; housekeeping removes
// them after their retention, exporting them under the state directory first.
import { resolve } from 'node:path';
import { sql } from 'kysely';
import { toLine, writeDurably, type QuarantineRow } from '../../jobs/housekeeping/export.js';
import type { Command } from '../command.js';
import { UsageError } from '../context.js';
import { parseWhen } from '../dates.js';

const PAGE = 5_000;

export const quarantineCommand: Command = {
  name: 'quarantine',
  summary: "a job's quarantined records as JSON Lines (they stay in the ledger)",
  usage: ['quarantine export <job> [--before DATE] [--out FILE]'],
  options: { before: { type: 'string' }, out: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    if (positionals[0] !== 'export') throw new UsageError('quarantine: the only subcommand is "export"');
    const job = positionals[1];
    if (!job) throw new UsageError('quarantine export: name the job whose records to export');
    const before = values.before ? parseWhen('--before', values.before as string, 'UTC') : new Date();
    const db = await ctx.db();
    const lines: string[] = [];
    for (let after = '0'; ;) {
      const { rows } =
        await sql<QuarantineRow>`select id::text as id, job, window_start, generation, record_key,
          reason, payload, created_at from quarantine
        where job = ${job} and created_at < ${before} and id > ${after}::bigint order by id limit ${PAGE}`.execute(
          db,
        );
      if (rows.length === 0) break;
      lines.push(...rows.map(toLine));
      after = rows[rows.length - 1]!.id;
    }
    if (lines.length === 0 && !ctx.catalog.has(job)) {
      // A job removed from the catalog keeps its records (exported above); a name nothing knows is a typo.
      const any = await db
        .selectFrom('quarantine')
        .select('id')
        .where('job', '=', job)
        .limit(1)
        .executeTakeFirst();
      if (!any)
        throw new UsageError(
          `quarantine export: no job "${job}" in the catalog and no quarantined records under that name (jobs: ${ctx.catalog.jobs.map((j) => j.name).join(', ')})`,
        );
    }
    if (values.out) {
      const file = resolve(values.out as string);
      await writeDurably(file, lines);
      return {
        json: { job, before: before.toISOString(), records: lines.length, file },
        lines: [
          `${lines.length} record(s) of ${job} quarantined before ${before.toISOString()} written to ${file}`,
        ],
      };
    }
    return { json: lines.map((l) => JSON.parse(l) as unknown), lines };
  },
};
