// `tidemark quarantine export`: a job's quarantined records as JSON Lines, to stdout or a file
// (written durably), streamed: read in keyset pages of QUARANTINE_PAGE rows by id, each page
// written out before the next is read, so memory holds one page whatever the job's count. The
// records stay in the ledger; housekeeping removes them after their retention, exporting them
// under the state directory first.
import { resolve } from 'node:path';
import { quarantinePages, toLine, writeDurably, type QuarantineRow } from '../../jobs/housekeeping/export.js';
import type { Command } from '../command.js';
import { UsageError } from '../context.js';
import { parseWhen } from '../../operator/dates.js';

async function* asLines(pages: AsyncIterable<QuarantineRow[]>): AsyncGenerator<string[]> {
  for await (const page of pages) yield page.map(toLine);
}

export const quarantineCommand: Command = {
  name: 'quarantine',
  summary: "a job's quarantined records as JSON Lines (they stay in the ledger)",
  usage: ['quarantine export <job> [--before DATE] [--out FILE]'],
  options: { before: { type: 'string' }, out: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    if (positionals[0] !== 'export') throw new UsageError('quarantine: the only subcommand is "export"');
    const job = positionals[1];
    if (!job) throw new UsageError('quarantine export: name the job whose records to export');
    // A plain date is read in the job's zone, as every command's; a job gone from the catalog: UTC.
    const zone = ctx.catalog.has(job) ? ctx.catalog.get(job).timezone : 'UTC';
    const before = values.before ? parseWhen('--before', values.before as string, zone) : new Date();
    const db = await ctx.db();
    if (!ctx.catalog.has(job)) {
      // A job removed from the catalog keeps its records (exported below); a name nothing knows is a typo.
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
    const lines = asLines(quarantinePages(db, job, before));
    if (values.out) {
      const file = resolve(values.out as string);
      const records = await writeDurably(file, lines);
      return {
        json: { job, before: before.toISOString(), records, file },
        lines: [
          `${records} record(s) of ${job} quarantined before ${before.toISOString()} written to ${file}`,
        ],
      };
    }
    const { io } = ctx;
    if (!io.json) {
      for await (const page of lines) page.forEach((l) => io.out(l));
      return { json: null, lines: [], printed: true };
    }
    // One JSON array, a record per line, each printed as its page is read.
    io.out('[');
    let held: string | undefined;
    for await (const page of lines)
      for (const l of page) {
        if (held !== undefined) io.out(`  ${held},`);
        held = l;
      }
    if (held !== undefined) io.out(`  ${held}`);
    io.out(']');
    return { json: null, lines: [], printed: true };
  },
};
