// An independent invariant checker for fault tests. It reads the database with its own SQL and
// the recording sinks (SMTP, chat) and shares no code with the ledger or the effect guard, so a
// bug there cannot hide itself here. It reports violations; it never repairs anything.
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

  // The watermark is the end of the contiguous done prefix (or absent / at the start before any).
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
    other.push(`watermark ${job}: ${watermark.toISOString()}, done prefix ends ${expected.toISOString()}`);
  if (!watermark && prefixEnd && checkWatermark)
    other.push(`watermark ${job}: missing, done prefix ends ${prefixEnd.toISOString()}`);

  // Every external effect received exactly once, or in doubt / failed and alerted exactly once.
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
  const recorded = new Set(effects.rows.map((e) => e.effect_key));
  for (const w of windows) {
    const key = `${job}/${w.start.toISOString().replace('.000Z', 'Z')}`;
    if (statusAt.get(w.start.getTime()) !== 'done') continue;
    for (const name of opts.effectsPerWindow ?? [])
      if (!recorded.has(`${key}:${name}`))
        lost.push(`effect ${key}:${name}: window done, effect never recorded`);
  }
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
  return { duplicates, lost, unalertedUnknowns, other };
}
