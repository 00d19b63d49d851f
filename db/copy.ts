// The bulk path for handlers that land many records: COPY over the window transaction's own
// connection (pg-copy-streams), in COPY's text format, so that rows reach the table at COPY's
// speed and commit, or not, with the window's done marker.
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

/** Rows are sent in pieces of about this many characters. */
const CHUNK_CHARS = 64 * 1024;
const ESCAPES: Readonly<Record<string, string>> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const SPECIAL = /[\\\n\r\t]/;
const SPECIALS = /[\\\n\r\t]/g;

/** One value in COPY's text format: \N for null, a backslash before the bytes the format gives a meaning. */
export function copyText(v: unknown): string {
  if (v === null || v === undefined) return '\\N';
  // Numbers and instants have none of the special bytes.
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (v instanceof Date) return v.toISOString();
  let s: string;
  if (v instanceof Uint8Array) s = `\\x${Buffer.from(v).toString('hex')}`;
  else if (typeof v === 'object') s = JSON.stringify(v);
  else s = String(v);
  return SPECIAL.test(s) ? s.replace(SPECIALS, (c) => ESCAPES[c]!) : s;
}

/** `schema.table` or `table`, each part quoted. */
const quoteName = (name: string) => name.split('.').map(pg.escapeIdentifier).join('.');

function* lines(columns: number, rows: Iterable<readonly unknown[]>): Generator<string> {
  let chunk = '';
  let i = 0;
  for (const row of rows) {
    if (row.length !== columns) {
      throw new Error(`row ${i} has ${row.length} values for ${columns} columns; nothing was copied`);
    }
    chunk += row.map(copyText).join('\t') + '\n';
    i++;
    if (chunk.length >= CHUNK_CHARS) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk) yield chunk;
}

/** COPY `rows` (arrays of values in `columns` order) into `table` over `client`; returns how many. */
export async function copyRows(
  client: pg.ClientBase,
  table: string,
  columns: readonly string[],
  rows: Iterable<readonly unknown[]>,
): Promise<number> {
  if (columns.length === 0) throw new Error(`copy into ${table}: name at least one column`);
  const stream = client.query(
    copyFrom(`COPY ${quoteName(table)} (${columns.map(pg.escapeIdentifier).join(', ')}) FROM STDIN`),
  );
  // Written straight to the stream (a window's rows are often one piece); the server's answer
  // (or error) ends it.
  const ended = finished(stream);
  try {
    for (const chunk of lines(columns.length, rows)) {
      if (!stream.write(chunk)) await once(stream, 'drain');
    }
  } catch (err) {
    stream.destroy(err as Error); // CopyFail: the server rolls the COPY back
    await ended.catch(() => undefined);
    throw err;
  }
  stream.end();
  await ended;
  return stream.rowCount;
}
