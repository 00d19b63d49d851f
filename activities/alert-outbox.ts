// Alerts that could not be delivered are not forgotten. The watch drives them again with a
// growing delay until they go out, reports a channel that stays down through the job's other
// channels (an `alert-undelivered` incident, listed by `tidemark incidents`), and clears that
// incident with a notice once nothing waits on the channel any more.
import { openIncidents } from '../db/effects.js';
import { undeliveredAlerts, type UndeliveredAlert } from '../db/notices.js';
import { alerting, INCIDENT_KIND } from './alerts.js';
import type { ActivityDeps } from './deps.js';

/** Deliveries already retry 5 times within their run; after that, 1 min, 2, 4, ... up to 1 h apart. */
const IN_RUN_ATTEMPTS = 5;
const FIRST_DELAY_MS = 60_000;
const MAX_DELAY_MS = 3_600_000;
/** At most this many deliveries are driven by one watch; the rest wait for the next. */
const PER_WATCH = 100;

export function redriveDelayMs(attempts: number): number {
  return Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.max(0, attempts - IN_RUN_ATTEMPTS));
}

const CHANNEL_SUBJECT = /^alerts:([^:]+):(.*)$/;

/** `alert:<incident>:<event>:<channel>:<target>` -> its incident and target. */
function parseKey(a: UndeliveredAlert): { incidentId: string; target: string } | null {
  const m = /^alert:(\d+):(?:opened|closed):([^:]+):(.*)$/.exec(a.effect_key);
  return m && m[2] === a.channel ? { incidentId: m[1]!, target: m[3]! } : null;
}

export function alertOutboxActivities(deps: ActivityDeps) {
  const { db, logger } = deps;
  const alerts = alerting(deps);

  /** Which of these alerts' incidents are themselves reports of a channel down (open or closed). */
  async function channelReportIds(list: readonly UndeliveredAlert[]): Promise<Set<string>> {
    const ids = [...new Set(list.map((a) => parseKey(a)?.incidentId).filter((i): i is string => !!i))];
    if (ids.length === 0) return new Set();
    const rows = await db
      .selectFrom('incidents')
      .select('id')
      .where('id', 'in', ids)
      .where('kind', '=', INCIDENT_KIND.alertUndelivered)
      .execute();
    return new Set(rows.map((r) => String(r.id)));
  }

  return {
    /** Undelivered alerts whose delay since their last attempt has passed, oldest first. */
    async alertsDue(input: { now?: string }): Promise<string[]> {
      const now = input.now ? new Date(input.now) : deps.now();
      const due = (await undeliveredAlerts(db)).filter(
        (a) =>
          // A delivery in progress is left to the attempt that holds it.
          !(a.status === 'begun' && a.lease_until && a.lease_until > now) &&
          a.updated_at.getTime() + redriveDelayMs(a.attempts) <= now.getTime(),
      );
      return due.slice(0, PER_WATCH).map((a) => a.effect_key);
    },

    /**
     * Reports every channel with alerts that failed to go out (through the job's other
     * channels, once), and clears the report of a channel with none left. Returns deliveries.
     */
    async reportUndeliveredAlerts(input: { now?: string } = {}): Promise<string[]> {
      const now = input.now ? new Date(input.now) : deps.now();
      const reports = (await openIncidents(db)).filter((i) => i.kind === INCIDENT_KIND.alertUndelivered);
      const failed = (await undeliveredAlerts(db)).filter(
        (a) => a.status === 'failed' || a.status === 'unknown',
      );
      const aboutChannels = await channelReportIds(failed);
      const groups = new Map<
        string,
        { job: string; channel: string; target: string; alerts: UndeliveredAlert[] }
      >();
      for (const a of failed) {
        const k = parseKey(a);
        // Alerts about a channel down are driven again, but not reported in turn.
        if (!k || aboutChannels.has(k.incidentId)) continue;
        const subject = `alerts:${a.channel}:${k.target}`;
        const group = groups.get(`${a.job}\n${subject}`) ?? {
          job: a.job,
          channel: a.channel,
          target: k.target,
          alerts: [],
        };
        group.alerts.push(a);
        groups.set(`${a.job}\n${subject}`, group);
      }
      const deliveries: string[] = [];
      // A channel stays down when an alert failed the retries of its own run, or long ago.
      const staysDown = (a: UndeliveredAlert) =>
        a.attempts >= IN_RUN_ATTEMPTS || a.created_at.getTime() + FIRST_DELAY_MS <= now.getTime();
      for (const g of groups.values()) {
        if (!g.alerts.some(staysDown)) continue;
        const last = g.alerts.at(-1)!;
        const raised = await alerts.raise(
          db,
          {
            job: g.job,
            subject: `alerts:${g.channel}:${g.target}`,
            kind: INCIDENT_KIND.alertUndelivered,
            error: `${g.alerts.length} alert(s) could not be delivered to ${g.channel} ${g.target} (last: ${last.last_error ?? 'no error recorded'}); they are retried until delivered`,
            attempts: Math.max(...g.alerts.map((a) => a.attempts)),
          },
          { channel: g.channel, target: g.target },
        );
        deliveries.push(...raised.deliveries);
      }
      // A report clears only once nothing failed waits on its channel any more.
      for (const r of reports) {
        const m = CHANNEL_SUBJECT.exec(r.subject);
        if (!m || groups.has(`${r.job}\n${r.subject}`)) continue;
        const cleared = await alerts.resolve(db, {
          job: r.job,
          subject: r.subject,
          note: `every alert to ${m[1]} ${m[2]} was delivered`,
        });
        deliveries.push(...(cleared?.deliveries ?? []));
      }
      if (groups.size > 0)
        logger.warn(
          `ALERTS undelivered on ${[...groups.keys()].map((k) => k.replace('\n', ' ')).join(', ')}`,
        );
      return deliveries;
    },
  };
}
