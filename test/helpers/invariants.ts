// An independent invariant checker for fault tests. It reads the database with its own SQL and
// the recording sinks (SMTP, chat) and shares no code with the ledger or the effect guard, so a
// bug there cannot hide itself here. It reports violations; it never repairs anything.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sql, type Kysely } from 'kysely';
import type { ParsedMail } from 'mailparser';
import type { Database } from '../../db/schema.js';
import { demo } from '../../jobs/demo-schema.js';
import type { ChatMessage } from './chat.js';
import { tm } from './db.js';

export interface Sinks {
  readonly emails: readonly ParsedMail[];
  readonly chat: readonly ChatMessage[];
}

export interface CheckResult {
  /**
   * An effect received more than once, or a window's records applied more than once; an alert sent
   * more than once (these start "alert about").
   */
  readonly duplicates: string[];
  /** A closed window neither done nor under an open incident; an effect neither received nor settled. */
  readonly lost: string[];
  /** An effect in doubt (unknown) or failed whose incident was never alerted; an incident never alerted. */
  readonly unalertedUnknowns: string[];
  /** Anything else: totals not equal to the reference, a watermark off the done prefix. */
  readonly other: string[];
}

export const violations = (r: CheckResult): string[] => [
  ...r.duplicates,
  ...r.lost,
  ...r.unalertedUnknowns,
  ...r.other,
];

const cents = (v: unknown): number => Math.round(Number(v) * 100);

/**
 * The watermark is the end of the contiguous done prefix (or absent / at the start before any).
 * `required`: a done prefix without a watermark is a finding too (false where no tick ever ran).
 */
async function watermarkFindings(
  db: Kysely<Database>,
  job: string,
  windows: readonly { start: Date; end: Date }[],
  statusAt: ReadonlyMap<number, string>,
  required: boolean,
): Promise<string[]> {
  let prefixEnd: Date | null = null;
  for (const w of windows) {
    if (statusAt.get(w.start.getTime()) !== 'done') break;
    prefixEnd = w.end;
  }
  const wm = await sql<{ watermark: Date }>`
    select watermark from ${tm.job_watermarks} where job = ${job}`.execute(db);
  const watermark = wm.rows[0]?.watermark ?? null;
  const expected = prefixEnd ?? windows[0]?.start ?? null;
  if (watermark && expected && watermark.getTime() !== expected.getTime())
    return [`watermark ${job}: ${watermark.toISOString()}, done prefix ends ${expected.toISOString()}`];
  if (!watermark && prefixEnd && required)
    return [`watermark ${job}: missing, done prefix ends ${prefixEnd.toISOString()}`];
  return [];
}

/**
 * Checks one job whose closed windows are `windows` (oldest first, contiguous, from the job's
 * start), over the sales-summary tables and orders in those windows.
 */
export async function checkInvariants(
  db: Kysely<Database>,
  job: string,
  windows: readonly { start: Date; end: Date }[],
  sinks: Sinks,
  opts: {
    /** False where no tick ever ran: only a tick sets a job's first watermark. */
    watermark?: boolean;
    /**
     * The effects (by name) every done window of the job records: a done window without one in
     * the ledger lost it (the ledger alone cannot show an effect that was never recorded).
     */
    effectsPerWindow?: readonly string[];
  } = {},
): Promise<CheckResult> {
  const checkWatermark = opts.watermark ?? true;
  const duplicates: string[] = [];
  const lost: string[] = [];
  const unalertedUnknowns: string[] = [];
  const other: string[] = [];

  const doneRows = await sql<{ window_start: Date; status: string; window_key: string }>`
    select window_start, status, window_key from ${tm.job_windows} where job = ${job} and generation = 0`.execute(
    db,
  );
  const statusAt = new Map(doneRows.rows.map((r) => [r.window_start.getTime(), r.status]));
  const openIncidents = await sql<{ subject: string; kind: string }>`
    select subject, kind from ${tm.incidents} where job = ${job} and closed_at is null`.execute(db);
  const openSubjects = new Set(openIncidents.rows.map((r) => r.subject));

  // Applied exactly once: each window's own contribution, and the job's daily totals, equal a
  // reference summed here from the source rows of the done windows.
  const daily = new Map<string, { count: number; cents: number }>();
  for (const w of windows) {
    const key = `${job}/${w.start.toISOString().replace('.000Z', 'Z')}`;
    const status = statusAt.get(w.start.getTime());
    if (status !== 'done') {
      if (!openSubjects.has(key)) lost.push(`window ${key}: ${status ?? 'no marker'} and no open incident`);
      continue;
    }
    const ref = await sql<{ day: string; n: number; total: string }>`
      select to_char(placed_at at time zone 'UTC', 'YYYY-MM-DD') as day, count(*)::int as n,
             coalesce(sum(amount), 0)::text as total
        from ${demo.orders} where placed_at >= ${w.start} and placed_at < ${w.end} and amount >= 0
       group by 1`.execute(db);
    // The newest done generation's contribution is the window's (a rerun replaces the one before).
    const got = await sql<{ n: number; total: string }>`
      select coalesce(sum(order_count), 0)::int as n, coalesce(sum(total), 0)::text as total
        from ${demo.sales_window_totals}
       where job = ${job} and window_start = ${w.start}
         and generation = (select max(generation) from ${tm.job_windows}
                            where job = ${job} and window_start = ${w.start} and status = 'done')`.execute(
      db,
    );
    const refN = ref.rows.reduce((s, r) => s + r.n, 0);
    const refCents = ref.rows.reduce((s, r) => s + cents(r.total), 0);
    const g = got.rows[0]!;
    if (g.n !== refN || cents(g.total) !== refCents) {
      (g.n > refN ? duplicates : other).push(
        `window ${key}: applied ${g.n} orders / ${cents(g.total)} cents, reference ${refN} / ${refCents}`,
      );
    }
    for (const r of ref.rows) {
      const d = daily.get(r.day) ?? { count: 0, cents: 0 };
      daily.set(r.day, { count: d.count + r.n, cents: d.cents + cents(r.total) });
    }
  }
  const days = await sql<{ day: string; order_count: number; total: string }>`
    select to_char(day, 'YYYY-MM-DD') as day, order_count, total::text as total
      from ${demo.daily_sales} where job = ${job}`.execute(db);
  const seenDays = new Set<string>();
  for (const d of days.rows) {
    seenDays.add(d.day);
    const ref = daily.get(d.day) ?? { count: 0, cents: 0 };
    if (d.order_count !== ref.count || cents(d.total) !== ref.cents)
      (d.order_count > ref.count ? duplicates : other).push(
        `daily total ${job} ${d.day}: ${d.order_count} orders / ${cents(d.total)} cents, reference ${ref.count} / ${ref.cents}`,
      );
  }
  for (const [day, ref] of daily)
    if (!seenDays.has(day) && ref.count > 0) lost.push(`daily total ${job} ${day}: missing`);

  // Bad records set aside: the newest done generation's quarantine holds exactly the bad source rows
  // of its window (amount missing or negative; each once, as quarantine_record_once makes sure; an
  // older done generation set aside what was bad when it ran); a generation not done (failed, or
  // never committed) holds none.
  const generations = await sql<{ window_start: Date; generation: number; status: string }>`
    select window_start, generation, status from ${tm.job_windows} where job = ${job}`.execute(db);
  const statusOf = new Map(
    generations.rows.map((g) => [`${g.window_start.getTime()}#${g.generation}`, g.status]),
  );
  const quarantined = await sql<{ window_start: Date; generation: number; record_key: string }>`
    select window_start, generation, record_key from ${tm.quarantine}
     where job = ${job} order by 1, 2, 3`.execute(db);
  const setAside = new Map<string, Set<string>>();
  for (const q of quarantined.rows) {
    const at = `${q.window_start.getTime()}#${q.generation}`;
    if (!setAside.has(at)) setAside.set(at, new Set());
    setAside.get(at)!.add(q.record_key);
  }
  const keyOf = (start: Date, generation: number) =>
    `${job}/${start.toISOString().replace('.000Z', 'Z')}${generation ? `#${generation}` : ''}`;
  for (const w of windows) {
    const bad = await sql<{ order_key: string }>`
      select order_key from ${demo.orders}
       where placed_at >= ${w.start} and placed_at < ${w.end} and (amount is null or amount < 0)
       order by order_key`.execute(db);
    const done = generations.rows.filter(
      (x) => x.window_start.getTime() === w.start.getTime() && x.status === 'done',
    );
    for (const g of done.filter((x) => x.generation === Math.max(...done.map((d) => d.generation)))) {
      const held = setAside.get(`${w.start.getTime()}#${g.generation}`) ?? new Set<string>();
      const what = `quarantine ${keyOf(w.start, 0)} generation ${g.generation}`;
      const missing = bad.rows.map((r) => r.order_key).filter((k) => !held.has(k));
      if (missing.length) lost.push(`${what}: ${missing.join(', ')} never set aside`);
      for (const k of held)
        if (!bad.rows.some((r) => r.order_key === k)) other.push(`${what}: ${k} set aside, not a bad record`);
    }
  }
  for (const [at, held] of setAside) {
    const status = statusOf.get(at);
    if (status === 'done') continue;
    const [ms, generation] = at.split('#').map(Number);
    const n = held.size;
    other.push(
      `quarantine ${keyOf(new Date(ms!), 0)} generation ${generation}: ${n} ${n === 1 ? 'record' : 'records'} set aside by a generation that is not done (${status ?? 'no marker'})`,
    );
  }

  other.push(...(await watermarkFindings(db, job, windows, statusAt, checkWatermark)));

  const out = { duplicates, lost, unalertedUnknowns, other };
  const effects = await effectsAndIncidents(db, job, sinks, openSubjects, out);
  const recorded = new Set(effects);
  for (const w of windows) {
    const key = `${job}/${w.start.toISOString().replace('.000Z', 'Z')}`;
    if (statusAt.get(w.start.getTime()) !== 'done') continue;
    for (const name of opts.effectsPerWindow ?? [])
      if (!recorded.has(`${key}:${name}`))
        lost.push(`effect ${key}:${name}: window done, effect never recorded`);
  }
  return out;
}

/**
 * Every external effect of the job (its alerts too) received exactly once, or in doubt / failed
 * and alerted exactly once; every incident alerted once, and its recovery once when closed. Adds
 * to `out`; returns the job's recorded effect keys.
 */
async function effectsAndIncidents(
  db: Kysely<Database>,
  job: string,
  sinks: Sinks,
  openSubjects: ReadonlySet<string>,
  out: CheckResult,
): Promise<string[]> {
  const { duplicates, lost, unalertedUnknowns, other } = out;
  const effects = await sql<{ effect_key: string; channel: string; status: string; request: unknown }>`
    select effect_key, channel, status, request from ${tm.effects} where job = ${job}`.execute(db);
  // An e-mail is the effect's delivery by its content: recipients, subject and text, all as asked
  // (addresses without their display names and case, lines however the mail ended them).
  const address = (a: string) => (/<([^>]*)>\s*$/.exec(a)?.[1] ?? a).trim().toLowerCase();
  const recipients = (m: ParsedMail): string =>
    [m.to ?? []]
      .flat()
      .flatMap((a) => a.value.map((v) => address(v.address ?? '')))
      .sort()
      .join(',');
  const body = (text: string | undefined) => (text ?? '').replace(/\r\n/g, '\n').trim();
  const received = (channel: string, request: unknown): number => {
    const r = request as { to?: string[]; subject?: string; text?: string };
    if (channel === 'email')
      return sinks.emails.filter(
        (m) =>
          m.subject === r.subject &&
          body(m.text) === body(r.text) &&
          recipients(m) === (r.to ?? []).map(address).sort().join(','),
      ).length;
    return sinks.chat.filter((m) => m.api === channel && m.text === r.text).length;
  };
  const subjectOnly = (channel: string, request: unknown): number =>
    channel === 'email'
      ? sinks.emails.filter((m) => m.subject === (request as { subject?: string }).subject).length
      : 0;
  const alertsAbout = (subject: string): number =>
    sinks.chat.filter((m) => {
      const first = m.text.split('\n')[0] ?? '';
      return (
        first.startsWith(`[tidemark] ${job}: `) &&
        first.endsWith(`(${subject})`) &&
        !first.includes(': recovered (')
      );
    }).length;
  for (const e of effects.rows) {
    const n = received(e.channel, e.request);
    const what = `effect ${e.effect_key} (${e.channel}, ${e.status})`;
    if (n > 1) duplicates.push(`${what}: received ${n} times`);
    const unlike = subjectOnly(e.channel, e.request) - n;
    if (unlike > 0)
      other.push(
        `${what}: ${unlike} ${unlike === 1 ? 'message' : 'messages'} with its subject but other content`,
      );
    if (e.status === 'done') {
      if (n === 0) lost.push(`${what}: marked done, never received`);
    } else if (e.status === 'unknown' || e.status === 'failed') {
      if (e.effect_key.startsWith('alert:')) {
        lost.push(`${what}: an alert not delivered`);
        continue;
      }
      const alerts = alertsAbout(e.effect_key);
      if (!openSubjects.has(e.effect_key) || alerts === 0)
        unalertedUnknowns.push(
          `${what}: ${openSubjects.has(e.effect_key) ? 'an open' : 'no open'} incident, alerted ${alerts} times`,
        );
      else if (alerts > 1) duplicates.push(`alert about ${what}: sent ${alerts} times`);
    } else if (e.status !== 'skipped') {
      lost.push(`${what}: never settled`);
    }
  }

  // Every incident alerted once when it opened and, once closed, its recovery sent once. The
  // messages name their incident on an `incident: <id>` line.
  const incidents = await sql<{ id: string; subject: string; kind: string; closed_at: Date | null }>`
    select id::text as id, subject, kind, closed_at from ${tm.incidents} where job = ${job}`.execute(db);
  const messagesOf = (id: string, recovered: boolean): number =>
    sinks.chat.filter(
      (m) =>
        new RegExp(`^incident: ${id}$`, 'm').test(m.text) &&
        m.text.startsWith(`[tidemark] ${job}: recovered (`) === recovered,
    ).length;
  for (const i of incidents.rows) {
    const what = `incident ${i.id} (${i.kind}, ${i.subject})`;
    const opened = messagesOf(i.id, false);
    if (opened === 0) unalertedUnknowns.push(`${what}: never alerted`);
    else if (opened > 1) duplicates.push(`alert about ${what}: sent ${opened} times`);
    if (i.closed_at) {
      const cleared = messagesOf(i.id, true);
      if (cleared === 0) lost.push(`alert about ${what}: closed, its recovery never sent`);
      else if (cleared > 1) duplicates.push(`alert about ${what}: recovery sent ${cleared} times`);
    }
  }
  return effects.rows.map((e) => e.effect_key);
}

/** A backup job's layout as the checker needs it (chaos/catalog.ts's backup jobs). */
export interface BackupLayout {
  /** The local destination's directory: objects at `<dir>/<prefix><name>`, staged under `.staging/`. */
  dir: string;
  /** The job's object prefix (`<job>/` unless the job says otherwise). */
  prefix: string;
  /** Every `every`-th window of the job's grid, from its first, is drilled. */
  drillEvery: number;
  /** The scratch database its drills restore into: gone once no drill runs. */
  scratchDatabase: string;
  /** The row counts every backup must record (its source does not change). */
  tableCounts: Record<string, number>;
}

async function sha256File(path: string): Promise<{ hex: string; bytes: number }> {
  const data = await readFile(path);
  return { hex: createHash('sha256').update(data).digest('hex'), bytes: data.length };
}

async function filesUnder(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/**
 * Checks a backup job whose closed windows are `windows` (oldest first, contiguous, from the
 * job's start), every one of them drilled: each window done once (one backups row, its object
 * published once with the recorded size and checksum, or removed by retention with its row marked
 * deleted) or failed under an open incident; each done window's drill recorded once and passed; no
 * object without a live row, nothing left staged, the scratch database dropped; every incident
 * alerted once. Run once the job's work has settled (a drill in flight holds its scratch database).
 */
export async function checkBackupInvariants(
  db: Kysely<Database>,
  job: string,
  windows: readonly { start: Date; end: Date }[],
  sinks: Sinks,
  layout: BackupLayout,
): Promise<CheckResult> {
  const out: CheckResult = { duplicates: [], lost: [], unalertedUnknowns: [], other: [] };
  const { duplicates, lost, other } = out;
  const keyOf = (start: Date) => `${job}/${start.toISOString().replace('.000Z', 'Z')}`;

  const statuses = await sql<{ window_start: Date; status: string }>`
    select window_start, status from ${tm.job_windows} where job = ${job} and generation = 0`.execute(db);
  const statusAt = new Map(statuses.rows.map((r) => [r.window_start.getTime(), r.status]));
  const open = await sql<{ subject: string }>`
    select subject from ${tm.incidents} where job = ${job} and closed_at is null`.execute(db);
  const openSubjects = new Set(open.rows.map((r) => r.subject));
  const backups = await sql<{
    window_key: string;
    object_key: string;
    bytes: string;
    sha256: string;
    table_counts: unknown;
    restore_checked: boolean;
    deleted: boolean;
    n: number;
  }>`
    select window_key, object_key, bytes::text as bytes, sha256, table_counts, restore_checked,
           deleted_at is not null as deleted, count(*) over (partition by window_key)::int as n
      from ${tm.backups} where job = ${job}`.execute(db);
  const backupOf = new Map(backups.rows.map((b) => [b.window_key, b]));
  const drills = await sql<{ window_key: string; ok: boolean; detail: string }>`
    select window_key, ok, detail from ${tm.backup_checks}
     where job = ${job} and kind = 'drill' and trigger = 'schedule'`.execute(db);

  windows.forEach((w, index) => {
    const key = keyOf(w.start);
    const status = statusAt.get(w.start.getTime());
    const b = backupOf.get(key);
    const drilled = drills.rows.filter((d) => d.window_key === key);
    if (status !== 'done') {
      // Failed (its drill or its dump), or never run: alerted under an open incident, nothing kept.
      if (!openSubjects.has(key)) lost.push(`window ${key}: ${status ?? 'no marker'} and no open incident`);
      if (b)
        other.push(`backup ${key}: a backups row for a window that is not done (${status ?? 'no marker'})`);
      if (drilled.length) other.push(`drill ${key}: recorded for a window that is not done`);
      return;
    }
    if (!b) {
      lost.push(`backup ${key}: window done, no backups row`);
      return;
    }
    if (b.n > 1) duplicates.push(`backup ${key}: ${b.n} backups rows`);
    const counts = (
      typeof b.table_counts === 'string' ? JSON.parse(b.table_counts) : b.table_counts
    ) as Record<string, number>;
    for (const [table, n] of Object.entries(layout.tableCounts))
      if (counts?.[table] !== n)
        other.push(`backup ${key}: ${table} recorded ${counts?.[table] ?? 'no'} rows, the source holds ${n}`);
    if (index % layout.drillEvery !== 0) return;
    // The drill ran with the window: recorded passed once (a failed one fails the window), never nothing.
    if (drilled.length === 0) lost.push(`drill ${key}: window done, its drill never recorded`);
    else if (drilled.length > 1) duplicates.push(`drill ${key}: recorded ${drilled.length} times`);
    for (const d of drilled.filter((x) => !x.ok))
      other.push(`drill ${key}: recorded failed (${d.detail}) for a window that is done`);
    if (!b.restore_checked) other.push(`backup ${key}: window drilled, restore_checked false`);
  });

  // The destination holds exactly the live backups, each as recorded; nothing staged after the work.
  const root = join(layout.dir, layout.prefix);
  const files = new Set(await filesUnder(root));
  const named = new Map(backups.rows.map((b) => [b.object_key, b]));
  for (const b of backups.rows) {
    const name = b.object_key.slice(layout.prefix.length);
    const what = `backup object ${b.object_key} (${b.window_key})`;
    if (b.deleted) {
      if (files.has(name)) other.push(`${what}: removed by retention, still in the destination`);
      continue;
    }
    if (!files.has(name)) {
      lost.push(`${what}: live, missing from the destination`);
      continue;
    }
    const got = await sha256File(join(root, name));
    if (got.hex !== b.sha256 || String(got.bytes) !== b.bytes)
      other.push(
        `${what}: ${got.bytes} bytes sha256 ${got.hex}, recorded ${b.bytes} bytes sha256 ${b.sha256}`,
      );
  }
  for (const name of files)
    if (!named.has(`${layout.prefix}${name}`))
      duplicates.push(`backup object ${layout.prefix}${name}: in the destination, no backups row names it`);
  for (const name of await filesUnder(join(layout.dir, '.staging', layout.prefix)))
    other.push(`backup object ${layout.prefix}${name}: left staged`);

  const scratch = await sql<{ n: number }>`
    select count(*)::int as n from pg_database where datname = ${layout.scratchDatabase}`.execute(db);
  if (scratch.rows[0]!.n > 0)
    other.push(`scratch database ${layout.scratchDatabase}: left behind once the drills settled`);

  other.push(...(await watermarkFindings(db, job, windows, statusAt, false)));

  await effectsAndIncidents(db, job, sinks, openSubjects, out);
  return out;
}
