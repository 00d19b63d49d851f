// Window keys: `<job>/<start ISO UTC>` (plus `#<generation>` for a rerun), the workflow id of a
// window's run and the idempotency key of its effects; the ledger, the activities and the
// operator layer read and write them alike.

/** ISO-8601 UTC with seconds, no milliseconds when they are zero: 2026-03-29T10:00:00Z. */
export function isoUtc(t: Date): string {
  return t.toISOString().replace('.000Z', 'Z');
}

/**
 * The window key `<job>/<start ISO UTC>`: the workflow id of the window's run and the
 * idempotency key of its effects. Generation 0 is the first run; an approved rerun is
 * generation n and gets the suffix `#<n>`.
 */
export function windowKey(job: string, start: Date, generation = 0): string {
  const base = `${job}/${isoUtc(start)}`;
  return generation === 0 ? base : `${base}#${generation}`;
}

/**
 * The job's window a key names (windowKey's inverse), or null for a key of another job or another
 * form (an incident's subject "tick", an effect key).
 */
export function parseWindowKey(job: string, key: string): { start: Date; generation: number } | null {
  if (!key.startsWith(`${job}/`)) return null;
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3})?Z)(?:#([1-9]\d*))?$/.exec(
    key.slice(job.length + 1),
  );
  if (!m) return null;
  const start = new Date(m[1]!);
  if (Number.isNaN(start.getTime()) || windowKey(job, start, Number(m[2] ?? 0)) !== key) return null;
  return { start, generation: Number(m[2] ?? 0) };
}
