// The statements an operation sends, captured (pg's query, patched while it runs) and run again
// under EXPLAIN (ANALYZE, BUFFERS), and what in a plan grows with the history: a sequential scan
// of a big table, a sort of many rows. Used by test/system/bench/scale.test.ts.
import pg from 'pg';

export interface Captured {
  text: string;
  values: unknown[];
}

/**
 * The statements `fn` sends, as pg is asked to run them (text and parameters). pg's query is
 * patched while `fn` runs, so nothing else may use the database meanwhile.
 */
export async function capture(fn: () => Promise<unknown>): Promise<Captured[]> {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  const seen: Captured[] = [];
  proto.query = function (this: unknown, ...args: unknown[]) {
    const [q, v] = args;
    if (typeof q === 'string') seen.push({ text: q, values: Array.isArray(v) ? v : [] });
    else if (q && typeof q === 'object' && 'text' in q)
      seen.push({
        text: String((q as { text: unknown }).text),
        values: ((q as { values?: unknown[] }).values ?? (Array.isArray(v) ? v : [])) as unknown[],
      });
    return original.apply(this, args);
  };
  try {
    await fn();
  } finally {
    proto.query = original;
  }
  // Transaction control is not a query to explain; claim and finish carry theirs in their text.
  return seen
    .flatMap((c) =>
      c.values.length === 0
        ? c.text
            .split(/;\s*(?=begin\b|commit\b|select\b|$)/i)
            .map((text) => ({ text: text.trim(), values: [] }))
        : [c],
    )
    .filter((c) => c.text !== '' && !/^(begin|commit|rollback|savepoint|release)\b/i.test(c.text));
}

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

export interface Explained {
  text: string;
  plan: PlanNode;
  buffers: number;
}

/** Each captured statement run again under EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back. */
export async function explainAll(
  url: string,
  statements: Captured[],
  rewind: string[] = [],
): Promise<Explained[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('begin');
    for (const r of rewind) await client.query(r);
    const out: Explained[] = [];
    for (const s of statements) {
      const res = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
        `explain (analyze, buffers, format json) ${s.text}`,
        s.values,
      );
      const plan = res.rows[0]!['QUERY PLAN'][0].Plan;
      out.push({
        text: s.text,
        plan,
        buffers: (plan['Shared Hit Blocks'] ?? 0) + (plan['Shared Read Blocks'] ?? 0),
      });
    }
    return out;
  } finally {
    await client.query('rollback').catch(() => undefined);
    await client.end();
  }
}

export function* nodes(p: PlanNode): Generator<PlanNode> {
  yield p;
  for (const c of p.Plans ?? []) yield* nodes(c);
}

export const BIG_TABLES = [
  'job_windows',
  'job_runs',
  'effects',
  'effect_attempts',
  'incidents',
  'quarantine',
];

/** What a plan does that grows with the history: a sequential scan of a big table, a sort of many rows. */
export function planProblems(e: Explained, maxSortRows: number): string[] {
  const problems: string[] = [];
  for (const n of nodes(e.plan)) {
    if (n['Node Type'] === 'Seq Scan' && BIG_TABLES.includes(n['Relation Name'] ?? ''))
      problems.push(`Seq Scan on ${n['Relation Name']}`);
    // A sort's cost is what goes in (a top-N sort under a limit puts out few of many).
    const sorted = (n.Plans ?? []).reduce(
      (a, c) => a + (c['Actual Rows'] ?? 0) * (c['Actual Loops'] ?? 1),
      0,
    );
    if ((n['Node Type'] === 'Sort' || n['Node Type'] === 'Incremental Sort') && sorted > maxSortRows)
      problems.push(`${n['Node Type']} of ${sorted} rows`);
  }
  return problems;
}
