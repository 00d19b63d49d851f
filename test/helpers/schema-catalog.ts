// The schema as pg_catalog describes it (tables, columns, functions, constraints, indexes), and
// what a later schema changed that code written for the earlier one would notice.
import { sql, type Kysely } from 'kysely';
import { Migrator, type Migration } from 'kysely/migration';
import { schemaOf } from '../../db/ledger-schema.js';
import { migrations } from '../../db/migrations/index.js';
import type { Database } from '../../db/schema.js';

export interface SchemaCatalog {
  /** `table.column` -> type, nullability, default (null: none; generated and identity columns count as defaults). */
  columns: Map<string, { type: string; notNull: boolean; default: string | null }>;
  /** `name(identity arguments)` -> result type. */
  functions: Map<string, string>;
  /** `table.constraint` -> kind (p, u, c, f, x) and definition. */
  constraints: Map<string, { kind: string; def: string }>;
  /** `table.index` -> uniqueness and definition (what an ON CONFLICT target is inferred from). */
  indexes: Map<string, { unique: boolean; def: string }>;
}

const skipped = `('kysely_migration', 'kysely_migration_lock')`;

/** The catalog of the schema `db` writes its ledger to. */
export async function snapshotCatalog(db: Kysely<Database>): Promise<SchemaCatalog> {
  const schema = schemaOf(db);
  const cols = await sql<{ key: string; type: string; not_null: boolean; def: string | null }>`
    select c.relname || '.' || a.attname as key, format_type(a.atttypid, a.atttypmod) as type, a.attnotnull as not_null,
           coalesce(pg_get_expr(d.adbin, d.adrelid),
                    case when a.attidentity <> '' then 'identity' when a.attgenerated <> '' then 'generated' end) as def
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where n.nspname = ${schema} and c.relkind in ('r', 'p') and a.attnum > 0 and not a.attisdropped
       and c.relname not in ${sql.raw(skipped)}`.execute(db);
  const fns = await sql<{ key: string; result: string }>`
    select p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')' as key,
           pg_get_function_result(p.oid) as result
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = ${schema}`.execute(db);
  const cons = await sql<{ key: string; kind: string; def: string }>`
    select c.relname || '.' || k.conname as key, k.contype::text as kind, pg_get_constraintdef(k.oid) as def
      from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = ${schema} and c.relname not in ${sql.raw(skipped)}`.execute(db);
  const idx = await sql<{ key: string; unique: boolean; def: string }>`
    select c.relname || '.' || i.relname as key, x.indisunique as unique, pg_get_indexdef(x.indexrelid) as def
      from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class c on c.oid = x.indrelid
      join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = ${schema} and c.relname not in ${sql.raw(skipped)}`.execute(db);
  return {
    columns: new Map(cols.rows.map((r) => [r.key, { type: r.type, notNull: r.not_null, default: r.def }])),
    functions: new Map(fns.rows.map((r) => [r.key, r.result])),
    constraints: new Map(cons.rows.map((r) => [r.key, { kind: r.kind, def: r.def }])),
    indexes: new Map(idx.rows.map((r) => [r.key, { unique: r.unique, def: r.def }])),
  };
}

const tableOf = (key: string): string => key.slice(0, key.indexOf('.'));

/**
 * What `after` changed that code written for `before` would notice, one sentence each: a table,
 * column, function, constraint or unique index dropped or renamed (a rename is a drop and an add);
 * a column's type changed or made NOT NULL; a default dropped from a NOT NULL column; a function's
 * result changed; a new NOT NULL column without a default on an existing table (old writers omit
 * it); a new CHECK, UNIQUE or EXCLUDE constraint or unique index on an existing table (old writers
 * may violate it). New tables, nullable columns, plain indexes and new functions are additive.
 */
export function breakingChanges(before: SchemaCatalog, after: SchemaCatalog): string[] {
  const found: string[] = [];
  const oldTables = new Set([...before.columns.keys()].map(tableOf));
  const newTables = new Set([...after.columns.keys()].map(tableOf));
  for (const t of oldTables) if (!newTables.has(t)) found.push(`dropped table ${t}`);
  for (const [key, was] of before.columns) {
    const now = after.columns.get(key);
    if (!now) {
      if (newTables.has(tableOf(key))) found.push(`dropped column ${key}`);
      continue;
    }
    if (now.type !== was.type) found.push(`changed type of column ${key}: ${was.type} -> ${now.type}`);
    if (now.notNull && !was.notNull) found.push(`made column ${key} not null`);
    if (now.notNull && was.default !== null && now.default === null)
      found.push(`dropped default of not-null column ${key}`);
  }
  for (const [key, now] of after.columns)
    if (!before.columns.has(key) && oldTables.has(tableOf(key)) && now.notNull && now.default === null)
      found.push(`new not-null column without a default ${key}`);
  for (const [sig, result] of before.functions) {
    const now = after.functions.get(sig);
    if (now === undefined) found.push(`dropped function ${sig}`);
    else if (now !== result) found.push(`changed result of function ${sig}: ${result} -> ${now}`);
  }
  for (const [key, was] of before.constraints) {
    const now = after.constraints.get(key);
    if (!now) found.push(`dropped constraint ${key}`);
    else if (now.def !== was.def) found.push(`changed constraint ${key}: ${was.def} -> ${now.def}`);
  }
  for (const [key, now] of after.constraints)
    if (!before.constraints.has(key) && oldTables.has(tableOf(key)) && 'pcux'.includes(now.kind))
      found.push(`new constraint on an existing table ${key}: ${now.def}`);
  for (const [key, was] of before.indexes) {
    if (!was.unique) continue;
    const now = after.indexes.get(key);
    if (!now) found.push(`dropped unique index ${key}`);
    else if (now.def !== was.def) found.push(`changed unique index ${key}: ${was.def} -> ${now.def}`);
  }
  const constraintIndexes = new Set([...after.constraints.keys()]);
  for (const [key, now] of after.indexes)
    if (now.unique && !before.indexes.has(key) && oldTables.has(tableOf(key)) && !constraintIndexes.has(key))
      found.push(`new unique index on an existing table ${key}: ${now.def}`);
  return found;
}

/**
 * A migrator over the real migrations plus `extra` (scratch migrations a test builds, never shipped),
 * run as migrate() runs them: kysely's table in the ledger's schema, each migration with the schema
 * as its transaction's search_path.
 */
export function migratorOf(
  db: Kysely<Database>,
  extra: Record<string, Migration> = {},
  list: Readonly<Record<string, Migration>> = migrations,
): Migrator {
  const schema = schemaOf(db);
  const all = Object.fromEntries(
    Object.entries({ ...list, ...extra }).map(([name, m]): [string, Migration] => [
      name,
      {
        up: async (trx) => {
          await sql`select set_config('search_path', ${schema}, true)`.execute(trx);
          await m.up(trx);
        },
      },
    ]),
  );
  return new Migrator({ db, migrationTableSchema: schema, provider: { getMigrations: async () => all } });
}

/** Migrates to `target` (a migration name, or the latest with `extra`), failing with the migration's error. */
export async function migrateTo(
  db: Kysely<Database>,
  target: string | 'latest',
  extra: Record<string, Migration> = {},
  list: Readonly<Record<string, Migration>> = migrations,
): Promise<string[]> {
  const m = migratorOf(db, extra, list);
  const { error, results } = target === 'latest' ? await m.migrateToLatest() : await m.migrateTo(target);
  if (error) throw error;
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
