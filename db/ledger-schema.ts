// The schema that holds tidemark's own objects (its ledger). Every statement names it: a query built
// with kysely's builder through the handle's plugin, raw SQL through `ledger(db)`. Nothing relies on
// the connection's search_path, which the user's role may set (and a job's own tables live there).
import { sql, WithSchemaPlugin, type Kysely, type RawBuilder } from 'kysely';
import { ConfigError } from '../contract/config-error.js';
import type { Database } from './schema.js';

/** Where tidemark keeps its objects unless TIDEMARK_SCHEMA says otherwise. */
export const DEFAULT_SCHEMA = 'tidemark';

/** A plain, lower-case identifier: written bare in SQL, the same in pg_namespace. */
const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * PostgreSQL's reserved words and those it reserves for type and function names (pg_get_keywords()
 * catcode R and T, PostgreSQL 15): bare, as the schema is written, they break the statements.
 */
const KEYWORDS: ReadonlySet<string> = new Set([
  'all',
  'analyse',
  'analyze',
  'and',
  'any',
  'array',
  'as',
  'asc',
  'asymmetric',
  'authorization',
  'binary',
  'both',
  'case',
  'cast',
  'check',
  'collate',
  'collation',
  'column',
  'concurrently',
  'constraint',
  'create',
  'cross',
  'current_catalog',
  'current_date',
  'current_role',
  'current_schema',
  'current_time',
  'current_timestamp',
  'current_user',
  'default',
  'deferrable',
  'desc',
  'distinct',
  'do',
  'else',
  'end',
  'except',
  'false',
  'fetch',
  'for',
  'foreign',
  'freeze',
  'from',
  'full',
  'grant',
  'group',
  'having',
  'ilike',
  'in',
  'initially',
  'inner',
  'intersect',
  'into',
  'is',
  'isnull',
  'join',
  'lateral',
  'leading',
  'left',
  'like',
  'limit',
  'localtime',
  'localtimestamp',
  'natural',
  'not',
  'notnull',
  'null',
  'offset',
  'on',
  'only',
  'or',
  'order',
  'outer',
  'overlaps',
  'placing',
  'primary',
  'references',
  'returning',
  'right',
  'select',
  'session_user',
  'similar',
  'some',
  'symmetric',
  'table',
  'tablesample',
  'then',
  'to',
  'trailing',
  'true',
  'union',
  'unique',
  'user',
  'using',
  'variadic',
  'verbose',
  'when',
  'where',
  'window',
  'with',
]);

/** The schema name, checked: a plain identifier that is not one of PostgreSQL's own. */
export function checkSchemaName(name: string, field = 'TIDEMARK_SCHEMA'): string {
  if (!IDENTIFIER.test(name))
    throw new ConfigError(
      field,
      `${JSON.stringify(name)} is not a plain schema name: use lower-case letters, digits and _ ` +
        '(at most 63, not starting with a digit), e.g. tidemark',
    );
  if (KEYWORDS.has(name))
    throw new ConfigError(
      field,
      `${JSON.stringify(name)} is a word PostgreSQL reserves: choose another schema name, e.g. tidemark`,
    );
  if (name.startsWith('pg_') || name === 'information_schema')
    throw new ConfigError(
      field,
      `${JSON.stringify(name)} is a schema PostgreSQL keeps for itself: choose another, e.g. tidemark`,
    );
  return name;
}

/** kysely's with-schema plugin that remembers its schema, so raw SQL can name it too. */
export class LedgerSchema extends WithSchemaPlugin {
  constructor(readonly schema: string) {
    super(schema);
  }
}

/** The schema a handle made by createDb (or a transaction of it) writes to. */
export function schemaOf(db: Pick<Kysely<unknown>, 'getExecutor'>): string {
  const plugin = db.getExecutor().plugins.find((p): p is LedgerSchema => p instanceof LedgerSchema);
  if (!plugin)
    throw new Error('this database handle carries no ledger schema: make it with createDb (db/database.ts)');
  return plugin.schema;
}

/** The names of the ledger's own functions. */
export type LedgerFunction =
  | 'tidemark_advance_watermark'
  | 'tidemark_claim_window'
  | 'tidemark_finish_window'
  | 'tidemark_fold_effect_counts'
  | 'tidemark_fold_window_counts'
  | 'tidemark_count_effects'
  | 'tidemark_count_windows'
  | 'tidemark_span_backlog';

/** Schema-qualified names for raw SQL: `sql\`select ... from ${t.job_windows}\``, `${t.fn('tidemark_claim_window')}`. */
export type LedgerNames = { readonly [T in keyof Database & string]: RawBuilder<unknown> } & {
  readonly schema: string;
  /** A ledger function's qualified name. */
  fn(name: LedgerFunction): RawBuilder<unknown>;
  /** A qualified name of another object of the schema (a sequence, an index, kysely's migration table). */
  object(name: string): RawBuilder<unknown>;
};

const cache = new Map<string, LedgerNames>();

/** The qualified names of the schema `db` writes to (or of the schema named). */
export function ledger(db: Pick<Kysely<unknown>, 'getExecutor'> | string): LedgerNames {
  const schema = typeof db === 'string' ? db : schemaOf(db);
  let names = cache.get(schema);
  if (!names) {
    const object = (name: string): RawBuilder<unknown> => sql.id(schema, name);
    names = new Proxy({ schema, fn: object, object } as unknown as LedgerNames, {
      get: (target, key) =>
        typeof key === 'string' && !(key in target)
          ? object(key)
          : (target as Record<string | symbol, unknown>)[key],
    });
    cache.set(schema, names);
  }
  return names;
}
