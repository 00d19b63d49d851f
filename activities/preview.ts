// The rerun preview's table difference: the declared tables' rows of the job (or window) copied
// aside before the handler runs, compared by key with what the handler left, all inside the
// window's transaction (which the preview rolls back, copies included).
import { createHash } from 'node:crypto';
import { sql, type Transaction } from 'kysely';
import pg from 'pg';
import { literal } from '../db/connection.js';
import type { Database } from '../db/schema.js';
import type { TableWrite } from '../schedules/job.js';
import type { PreviewRow, PreviewTable, RerunPreview } from '../contract/workflows.js';

/** Rows listed per table; the counts cover every change. */
export const PREVIEW_ROWS = 20;
/** A table holding more of the job's rows than this is not copied aside (its size is said instead). */
export const PREVIEW_MAX_ROWS = 100_000;
/** Columns listed per row besides its key (a changed row lists those that change). */
export const PREVIEW_COLUMNS = 30;
/** The listed rows of all tables together, in characters of JSON: past it rows are only counted. */
export const PREVIEW_CHARS = 256 * 1024;
/** A longer value is cut, so that a preview stays small in the workflow's history and on Slack. */
const MAX_VALUE = 120;

const ident = (name: string) =>
  name
    .split('.')
    .map((p) => pg.escapeIdentifier(p))
    .join('.');

/** The rows of `t` the job's window can touch: narrowed by key columns naming the job or the window. */
function scopeOf(t: TableWrite, w: { job: string; start: Date; key0: string }): string {
  const where = t.key.flatMap((c) =>
    c === 'job'
      ? [`"job" = ${literal(w.job)}`]
      : c === 'window_start'
        ? [`"window_start" = ${literal(w.start)}::timestamptz`]
        : c === 'window_key'
          ? [`"window_key" like ${literal(`${w.key0}%`)}`]
          : [],
  );
  return where.length ? where.join(' and ') : 'true';
}

const ASSIGNED_DEFAULT =
  '(nextval|now|current_timestamp|clock_timestamp|statement_timestamp|transaction_timestamp|gen_random_uuid|uuid_generate)';

/** Columns whose value the database makes up when a row is written (identity, serial, a time or uuid default). */
async function assignedColumns(trx: Transaction<Database>, table: string): Promise<string[]> {
  const r = await sql<{ name: string }>`${sql.raw(`
    select a.attname as name from pg_attribute a
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where a.attrelid = ${literal(ident(table))}::regclass and a.attnum > 0 and not a.attisdropped
       and (a.attidentity <> '' or pg_get_expr(d.adbin, d.adrelid) ~* ${literal(ASSIGNED_DEFAULT)})`)}`.execute(
    trx,
  );
  return r.rows.map((x) => x.name);
}

export interface Snapshot {
  readonly write: TableWrite;
  readonly scope: string;
  readonly copy: string | null;
  readonly tooLarge?: number;
}

/**
 * Copies each declared table's rows in scope into a temporary table dropped with the transaction.
 * Statements are sent with their values written in (no parameters), so that no plan of a
 * temporary table is kept on the pooled connection past it.
 */
export async function snapshot(
  trx: Transaction<Database>,
  writes: readonly TableWrite[],
  w: { job: string; start: Date; key0: string },
): Promise<Snapshot[]> {
  const out: Snapshot[] = [];
  for (const [i, write] of writes.entries()) {
    const scope = scopeOf(write, w);
    const n = await sql<{ n: number }>`${sql.raw(
      `select count(*)::int as n from (select 1 from ${ident(write.table)} where ${scope} limit ${PREVIEW_MAX_ROWS + 1}) s`,
    )}`.execute(trx);
    if (n.rows[0]!.n > PREVIEW_MAX_ROWS) {
      out.push({ write, scope, copy: null, tooLarge: n.rows[0]!.n });
      continue;
    }
    const copy = `tidemark_preview_${i}`;
    await sql`${sql.raw(
      `create temporary table ${copy} on commit drop as select * from ${ident(write.table)} where ${scope}`,
    )}`.execute(trx);
    out.push({ write, scope, copy });
  }
  return out;
}

type Values = Record<string, string | null>;
/** A value as shown: cut, and with secrets redacted (the preview goes to the history, Slack, the page). */
const shown = (x: string | null, redact: (t: string) => string): string | null =>
  x === null ? null : redact(x.length > MAX_VALUE ? `${x.slice(0, MAX_VALUE)}...` : x);
const cut = (v: Values | null, redact: (t: string) => string): Values | null =>
  v && Object.fromEntries(Object.entries(v).map(([k, x]) => [k, shown(x, redact)]));

/** Each snapshot compared with its table as the handler left it. */
export async function diff(
  trx: Transaction<Database>,
  snaps: readonly Snapshot[],
  redact: (text: string) => string = (t) => t,
): Promise<PreviewTable[]> {
  // Timestamps printed in UTC whatever the server's zone; the zone is put back after, for an
  // approved rerun's transaction goes on to commit.
  const zone = await sql<{ z: string }>`select current_setting('TimeZone') as z`.execute(trx);
  await sql`select set_config('TimeZone', 'UTC', true)`.execute(trx);
  const tables: PreviewTable[] = [];
  let budget = PREVIEW_CHARS;
  for (const s of snaps) {
    const { table, key } = s.write;
    if (!s.copy) {
      tables.push({
        table,
        key,
        added: 0,
        removed: 0,
        changed: 0,
        rows: [],
        fingerprint: '',
        tooLarge: s.tooLarge!,
      });
      continue;
    }
    const on = key.map((c) => `b.${pg.escapeIdentifier(c)} = a.${pg.escapeIdentifier(c)}`).join(' and ');
    const keys = key.map(
      (c, i) => `coalesce(a.${pg.escapeIdentifier(c)}, b.${pg.escapeIdentifier(c)}) as k${i}`,
    );
    // Values the database assigns as the row is written (a serial id, a created_at) differ from
    // run to run: left out, or no preview computed again would ever be the same; so are the
    // columns the job declares volatile (set by the handler to a clock or a random value). A value
    // set to the transaction's time reads "now()".
    const assigned = [...(await assignedColumns(trx, table)), ...(s.write.volatile ?? [])];
    const skip = `array[${assigned.map((c) => literal(c)).join(', ')}]::text[]`;
    // Values as text in the table's column order: numerics keep their scale, dates stay dates.
    const asText = (r: string) =>
      `(select json_object_agg(key, case when value = to_json(now()) #>> '{}' then 'now()' else value end)
          from json_each_text(row_to_json(${r})) where key <> all(${skip}))`;
    const changes = `
      with d as (
        select case when b is null then 'added' when a is null then 'removed' else 'changed' end as change,
               ${keys.join(', ')},
               case when b is null then null else ${asText('b')} end as before,
               case when a is null then null else ${asText('a')} end as after
          from ${s.copy} b full join (select * from ${ident(table)} where ${s.scope}) a on ${on}
         where b is null or a is null or to_jsonb(a) - ${skip} <> to_jsonb(b) - ${skip}
      )`;
    const order = key.map((_, i) => `k${i}`).join(', ');
    // The listed rows' values cut by the server: a 10 MB value would otherwise cross the wire
    // (and the worker's memory) twice per row, only to be cut to MAX_VALUE characters here.
    // A changed row lists its key and the columns that change, at most PREVIEW_COLUMNS of them (a
    // wide table's rows would otherwise fill the workflow's history: Temporal refuses 2 MB).
    const keyArray = `array[${key.map((c) => literal(c)).join(', ')}]::text[]`;
    // The other side as jsonb: looking a column up in it does not parse the row's text again.
    const shows = (other: string) =>
      `(change <> 'changed' or e.value is distinct from (${other}_b ->> e.key))`;
    const short = (side: string, other: string) =>
      `(select json_object_agg(x.key, left(x.value, ${MAX_VALUE + 1})) from (
          select e.key, e.value from json_each_text(${side}) with ordinality e(key, value, i)
           where e.key = any(${keyArray}) or ${shows(other)}
           order by e.key = any(${keyArray}) desc, e.i limit ${key.length + PREVIEW_COLUMNS}) x)`;
    const more = `greatest(0, (select count(*) from json_each_text(coalesce(after, before)) e
        where e.key <> all(${keyArray}) and ${shows('before')}) - ${PREVIEW_COLUMNS})::int`;
    // Every changed row goes into the fingerprint, the ones past the listed rows too; each row
    // hashed on its own, so that the aggregate stays small whatever the rows hold.
    const counts = await sql<{
      added: number;
      removed: number;
      changed: number;
      fingerprint: string;
    }>`${sql.raw(
      `${changes} select count(*) filter (where change = 'added')::int as added,
                        count(*) filter (where change = 'removed')::int as removed,
                        count(*) filter (where change = 'changed')::int as changed,
                        md5(coalesce(string_agg(md5(change || coalesce(before::text, '') || '>' || coalesce(after::text, '')), '|' order by ${order}), '')) as fingerprint
                   from d`,
    )}`.execute(trx);
    const rows = await sql<{
      change: PreviewRow['change'];
      before: Values | null;
      after: Values | null;
      more: number;
    }>`${sql.raw(
      `${changes}, listed as (
         select *, case change when 'changed' then 0 when 'added' then 1 else 2 end as rank,
                before::jsonb as before_b, after::jsonb as after_b from d
          order by rank, ${order} limit ${PREVIEW_ROWS})
        select change, ${short('before', 'after')} as before, ${short('after', 'before')} as after, ${more} as more
          from listed order by rank, ${order}`,
    )}`.execute(trx);
    const c = counts.rows[0]!;
    tables.push({
      table,
      key,
      added: c.added,
      removed: c.removed,
      changed: c.changed,
      fingerprint: c.fingerprint,
      rows: rows.rows.flatMap((r) => {
        const side = (r.after ?? r.before)!;
        const row: PreviewRow = {
          change: r.change,
          key: Object.fromEntries(key.map((c) => [c, shown(side[c] ?? null, redact)])),
          before: cut(r.before, redact),
          after: cut(r.after, redact),
          ...(r.more > 0 ? { more: r.more } : {}),
        };
        // Past the preview's budget, rows are counted, not listed.
        budget -= JSON.stringify(row).length;
        return budget >= 0 ? [row] : [];
      }),
    });
  }
  await sql`select set_config('TimeZone', ${zone.rows[0]!.z}, true)`.execute(trx);
  return tables;
}

/** The digest of what a preview says would change (not of when or by whom it was computed). */
export function previewDigest(p: Omit<RerunPreview, 'digest' | 'computedAt'>): string {
  const change = {
    outcome: p.outcome,
    note: p.note ?? null,
    counts: p.counts ?? null,
    tables: p.tables,
    effects: p.effects,
    findings: p.findings,
  };
  return createHash('sha256').update(JSON.stringify(change)).digest('hex').slice(0, 16);
}
