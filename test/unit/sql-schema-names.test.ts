// Product code names the schema of every ledger and demo object its SQL touches (issue 29: nothing
// relies on the connection's search_path). A static guard beside the runtime one (test databases
// have search_path ''): it reads every string and template literal of the product's source files
// that looks like SQL and refuses a ledger or demo table named bare after from, into, update, join,
// table, references, on, copy, ...; a ledger function called bare; a bare name cast to regclass;
// `sql.table('job_windows')`; and a builder query on a demo table not made with `withSchema`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { DEMO_TABLES } from '../../jobs/demo-schema.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** Folders that are not product code, or whose SQL runs with the schema as its search_path (migrations). */
const SKIPPED = new Set([
  'node_modules',
  'test',
  'dist',
  // The benchmark's compiled copy of the sources (bench/backfill-process.ts).
  '.bench-build',
  '.git',
  '.node',
  '.venv',
  '.tidemark',
  'db/migrations',
]);

function productFiles(dir = root): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return SKIPPED.has(relative(root, path)) ? [] : productFiles(path);
    return /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The ledger's tables and functions, as the migrations create them (less the demo's tables). */
function ledgerObjects(): { tables: string[]; functions: string[] } {
  const dir = join(root, 'db/migrations');
  const text = readdirSync(dir)
    .filter((f) => f.endsWith('.ts'))
    .map((f) => readFileSync(join(dir, f), 'utf8'))
    .join('\n');
  const tables = new Set(['kysely_migration', 'kysely_migration_lock']);
  for (const m of text.matchAll(/createTable\('([a-z_]+)'\)|create table (?:if not exists )?([a-z_]+)/gi))
    tables.add((m[1] ?? m[2])!.toLowerCase());
  const functions = new Set<string>();
  for (const m of text.matchAll(/create (?:or replace )?function ([a-z_]+)/gi))
    functions.add(m[1]!.toLowerCase());
  return {
    tables: [...tables].filter((t) => !(DEMO_TABLES as readonly string[]).includes(t)),
    functions: [...functions],
  };
}

const ledgerNames = ledgerObjects();
const TABLES = [...ledgerNames.tables, ...DEMO_TABLES];
const names = TABLES.join('|');
/** Text that is a statement (or part of one), not a message or a description. */
const LOOKS_LIKE_SQL =
  /\b(select|insert\s+into|delete\s+from|update\s+\S+\s+set|create\s+(temporary\s+|unlogged\s+)?(table|index|unique\s+index)|alter\s+table|drop\s+(table|index)|truncate|analyze|vacuum|copy)\b/i;
const BARE_TABLE = new RegExp(
  `\\b(from|into|update|join|table|references|on|copy|truncate|exists|analyze|lock|only)\\s+"?(${names})"?(?![\\w.$"])`,
  'gi',
);
const BARE_FUNCTION = new RegExp(`(?<![\\w."])(${ledgerNames.functions.join('|')})"?\\s*\\(`, 'gi');
const BARE_REGCLASS = new RegExp(
  `'(${names})'\\s*::\\s*regclass|(to_regclass|pg_total_relation_size|pg_relation_size|pg_table_size|pg_indexes_size)\\(\\s*'(${names})'`,
  'gi',
);
const BUILDER = new Set(['selectFrom', 'insertInto', 'updateTable', 'deleteFrom', 'mergeInto']);

/** The places in `code` (a source file at `path`, relative) that name a ledger or demo object bare. */
export function bareNames(path: string, code: string): string[] {
  const file = ts.createSourceFile(path, code, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const at = (node: ts.Node, what: string) =>
    found.push(`${path}:${file.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${what}`);
  const checkText = (node: ts.Node, text: string) => {
    if (!LOOKS_LIKE_SQL.test(text)) return;
    for (const re of [BARE_TABLE, BARE_FUNCTION, BARE_REGCLASS])
      for (const m of text.matchAll(re)) at(node, m[0].replace(/\s+/g, ' '));
  };
  const visit = (node: ts.Node): void => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) checkText(node, node.text);
    else if (ts.isTemplateExpression(node))
      // A substitution (`${ledger(db).effects}`, `${schema}`) names its object itself.
      checkText(
        node,
        node.head.text + node.templateSpans.map((s) => ` \u2039expr\u203a ${s.literal.text}`).join(''),
      );
    else if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression)) {
      const method = node.expression.name.text;
      const first = node.arguments[0];
      const literal =
        first && ts.isStringLiteralLike(first) ? first.text.split(/\s+as\s+/)[0]!.trim() : undefined;
      const receiver = node.expression.expression.getText(file);
      if (
        literal &&
        (method === 'table' || method === 'id') &&
        /^sql$/.test(receiver) &&
        node.arguments.length === 1 &&
        TABLES.includes(literal)
      )
        at(node, `sql.${method}('${literal}')`);
      if (
        literal &&
        BUILDER.has(method) &&
        (DEMO_TABLES as readonly string[]).includes(literal) &&
        !receiver.includes('withSchema(')
      )
        at(node, `${method}('${literal}') without withSchema(DEMO_SCHEMA)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

test('the guard refuses bare ledger and demo names, and passes qualified ones', () => {
  const bare = [
    'const a = sql`select watermark from job_watermarks where job = ${job}`;',
    'const b = sql`insert into daily_sales (job, day) values (${job}, ${day})`;',
    "const c = client.query('select count(*) from effects e join job_windows w on w.job = e.job');",
    'const d = sql`select tidemark_claim_window(${job})`;',
    "const e = sql`select pg_total_relation_size('job_runs')`;",
    "const f = sql`delete from ${sql.table('quarantine')} where id = 1`;",
    "const g = ctx.trx.selectFrom('orders').selectAll();",
    'const h = `update "orders" set amount = 0`;',
  ].join('\n');
  const found = bareNames('probe.ts', bare);
  for (const want of [
    /:1: from job_watermarks/,
    /:2: into daily_sales/,
    /:3: from effects/,
    /:3: join job_windows/,
    /:4: tidemark_claim_window\(/,
    /:5: pg_total_relation_size\('job_runs'/,
    /:6: sql\.table\('quarantine'\)/,
    /:7: selectFrom\('orders'\) without withSchema/,
    /:8: update "orders"/,
  ])
    assert.ok(
      found.some((f) => want.test(f)),
      `${want} not found in:\n${found.join('\n')}`,
    );
  const qualified = [
    'const t = ledger(db);',
    'const a = sql`select watermark from ${t.job_watermarks} where job = ${job}`;',
    'const b = sql`insert into ${demo.daily_sales} (job, day) values (${job}, ${day})`;',
    'const c = sql.raw(`select ${schema}.tidemark_claim_window(1)`);',
    'const d = sql`select pg_total_relation_size(${`${schema}.job_runs`}::regclass)`;',
    "const e = ctx.trx.withSchema(DEMO_SCHEMA).selectFrom('orders').selectAll();",
    "const f = db.selectFrom('job_windows').selectAll();", // the handle's plugin names the ledger's schema
    "const g = { description: 'Sums closed windows of orders into daily_sales, bad orders to quarantine' };",
    'const h = sql`update ${demo.marketplace_items} set x = 1 where marketplace_items.version < 2`;',
  ].join('\n');
  assert.deepEqual(bareNames('probe.ts', qualified), []);
});

test('product code names the schema of every ledger and demo object its SQL touches', () => {
  const files = productFiles();
  assert.ok(
    files.some((f) => f.endsWith('db/ledger.ts')) && files.length > 100,
    `only ${files.length} files read`,
  );
  assert.ok(
    ledgerNames.tables.includes('job_windows') && ledgerNames.functions.includes('tidemark_claim_window'),
  );
  const found = files.flatMap((f) => bareNames(relative(root, f), readFileSync(f, 'utf8')));
  assert.deepEqual(
    found,
    [],
    `named without their schema (use ledger(db) or demo, jobs/demo-schema.ts):\n${found.join('\n')}`,
  );
});
