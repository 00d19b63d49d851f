// What every CLI command gets: output (text or --json), the catalog, and lazily opened
// connections to PostgreSQL and Temporal, closed once at the end.
import type { Client, Connection } from '@temporalio/client';
import type { Kysely } from 'kysely';
import { loadConfig, type Config } from '../config/env.js';
import { connectTemporalClient } from '../workers/temporal-connection.js';
import { createDb, ensureDatabase, migrateAll } from '../db/database.js';
import type { Database } from '../db/schema.js';
import { isFallbackDemo } from '../config/catalog-source.js';
import { buildCatalog } from '../jobs/catalog.js';
import type { Catalog, Job } from '../schedules/job.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import { shutdownTracing } from '../workers/tracing.js';

/** Exit codes: 0 done, 1 the command failed, 2 the command line is wrong. */
export const EXIT = Object.freeze({ ok: 0, failed: 1, usage: 2 });

export class UsageError extends Error {
  readonly code = 'USAGE';
}

export interface CliIO {
  out(line: string): void;
  err(line: string): void;
  json: boolean;
  /** Progress may redraw one line (a bar) only on a terminal. */
  tty: boolean;
}

export class CliContext {
  readonly config: Config;
  readonly catalog: Catalog;
  private dbHandle: Kysely<Database> | undefined;
  private migrated = false;
  private connection: Connection | undefined;
  private clientHandle: Client | undefined;

  constructor(
    readonly io: CliIO,
    config?: Config,
    catalog?: Catalog,
  ) {
    this.config = config ?? loadConfig();
    this.catalog = catalog ?? buildCatalog(this.config);
  }

  job(name: string | undefined, command: string): Job {
    if (!name)
      throw new UsageError(`${command}: name a job (${this.catalog.jobs.map((j) => j.name).join(', ')})`);
    return this.catalog.get(name);
  }

  /** The database, migrated (the ledger's and the catalog's migrations) unless `migrated: false`. */
  async db(opts: { migrated?: boolean } = {}): Promise<Kysely<Database>> {
    if (!this.dbHandle) {
      await ensureDatabase(this.config.DATABASE_URL);
      this.dbHandle = createDb(this.config.DATABASE_URL, { max: 2, schema: this.config.TIDEMARK_SCHEMA });
    }
    if (opts.migrated !== false && !this.migrated) {
      // The demo that no catalog named makes no tables in what may be the user's own database.
      await migrateAll(this.dbHandle, isFallbackDemo(this.catalog) ? {} : this.catalog.migrations);
      this.migrated = true;
    }
    return this.dbHandle;
  }

  async client(): Promise<Client> {
    if (!this.clientHandle) {
      // The error names the address, the setting it came from, and what to check (TLS, API key).
      const { connection, client } = await connectTemporalClient(this.config, { connectTimeout: 5_000 });
      this.connection = connection;
      await ensureSearchAttributes(connection, this.config.TEMPORAL_NAMESPACE);
      this.clientHandle = client;
    }
    return this.clientHandle;
  }

  async close(): Promise<void> {
    await this.dbHandle?.destroy();
    await this.connection?.close();
    await shutdownTracing();
  }
}

/** Whole numbers of at least 1, named in the error. */
export function positiveInt(option: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1)
    throw new UsageError(`--${option}: "${text}" is not a whole number of at least 1`);
  return n;
}

/** Fixed-width text table. */
export function table(header: string[], rows: (string | number | null)[][]): string[] {
  const cells = [header, ...rows.map((r) => r.map((c) => (c === null ? '-' : String(c))))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) =>
    r
      .map((c, i) => (c ?? '').padEnd(widths[i]!))
      .join('  ')
      .trimEnd(),
  );
}
