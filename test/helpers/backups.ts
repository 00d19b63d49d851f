// What the backup command tests share: a ledger and a source database (a table of 300 items), a
// directory for the backups, the real job's handler run in a ledger transaction as the worker runs
// it, and `tidemark backups` run as the CLI runs it (its printed lines and its exit code).
import { handlerTransaction } from '../../activities/window-transaction.js';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { backupsCommand } from '../../cli/commands/backups.js';
import { CliContext } from '../../cli/context.js';
import { loadConfig } from '../../config/env.js';
import { localDestination } from '../../jobs/backup/destination.js';
import { databaseBackup, type BackupOptions } from '../../jobs/backup/index.js';
import type { Catalog } from '../../schedules/job.js';
import { capturedIo } from './cli-io.js';
import { createTestDb, type TestDb } from './db.js';

export const day = (n: number): Date => new Date(Date.parse('2026-10-01T00:00:00Z') + n * 86_400_000);

export class BackupFixture {
  ledger!: TestDb;
  source!: TestDb;
  dir!: string;
  private readonly made: string[] = [];

  async start(tag: string): Promise<this> {
    [this.ledger, this.source] = await Promise.all([createTestDb(), createTestDb({ migrated: false })]);
    this.dir = await mkdtemp(join(tmpdir(), `${tag}-`));
    await sql`create table public.items (id int primary key, label text not null)`.execute(this.source.db);
    await sql`insert into public.items select n, 'item ' || n from generate_series(1, 300) n`.execute(
      this.source.db,
    );
    return this;
  }

  async stop(): Promise<void> {
    if (this.ledger) {
      const admin = new pg.Client({ connectionString: this.ledger.url });
      await admin.connect();
      for (const name of this.made)
        await admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
      await admin.end();
    }
    await Promise.all([this.ledger?.drop(), this.source?.drop()]);
  }

  /** A database next to the source's (dropped at the end): a restore's target. */
  sibling = (suffix: string): string => {
    const u = new URL(this.source.url);
    u.pathname = `${u.pathname}_${suffix}`;
    this.made.push(u.pathname.slice(1));
    return u.toString();
  };

  backupJob = (name: string, opts: Partial<BackupOptions> = {}) =>
    databaseBackup({
      name,
      grid: 'day',
      timezone: 'UTC',
      start: day(0).toISOString(),
      database: this.source.url,
      destination: localDestination(join(this.dir, name)),
      retention: { daily: 30, weekly: 0, monthly: 0 },
      tables: ['public.items'],
      ...opts,
    });

  /** Window `n` of the job, its handler in a ledger transaction as the worker runs it. */
  backUp = async (catalog: Catalog, job: string, n: number): Promise<void> => {
    const j = catalog.get(job);
    const window = { start: day(n), end: day(n + 1) };
    const key = `${job}/${window.start.toISOString().replace('.000Z', 'Z')}`;
    await this.ledger.db.transaction().execute((trx) =>
      j.handler({
        ...handlerTransaction(trx, { job, start: window.start, generation: 0 }),
        job: j,
        window,
        key,
        generation: 0,
        attempt: 1,
        log: () => undefined,
        copyRows: async () => 0,
      }),
    );
  };

  /** `tidemark backups <sub> <job> --flag value ...` against the fixture's ledger. */
  cli = async (catalog: Catalog, args: string[]) => {
    const [sub, job, ...rest] = args;
    const { lines, io } = capturedIo();
    const ctx = new CliContext(io, { ...loadConfig(), DATABASE_URL: this.ledger.url }, catalog);
    const values: Record<string, string | boolean> = {};
    for (let i = 0; i < rest.length; i++) {
      const name = rest[i]!.slice(2);
      const next = rest[i + 1];
      if (next === undefined || next.startsWith('--')) values[name] = true;
      else values[name] = rest[++i]!;
    }
    try {
      const r = await backupsCommand.run(ctx, { positionals: [sub!, job!], values });
      return {
        code: r.exitCode ?? 0,
        json: r.json as Record<string, unknown>,
        lines: [...lines, ...r.lines],
      };
    } finally {
      await ctx.close();
    }
  };
}

export async function rows(
  url: string,
  q = 'select id, label from public.items order by id',
): Promise<unknown[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(q)).rows;
  } finally {
    await c.end();
  }
}
