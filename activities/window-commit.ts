// What a processed window records with its commit besides its done marker (its external effects as
// an outbox, the recovery notice of its earlier failures, its findings' incidents and the notices
// it owes), and what it reports once committed (its outcome line, metric and result). The same for a
// window in a transaction of its own and for one in a batch's group.
import type { Transaction } from 'kysely';
import { isoUtc } from '../contract/window-key.js';
import type { ActivityPolicy, WindowResult } from '../contract/workflows.js';
import { recordEffects } from '../db/effects.js';
import type { WindowRef } from '../db/ledger.js';
import { recordWindowNotices } from '../db/notices.js';
import type { Database } from '../db/schema.js';
import type { WindowCounts } from '../schedules/job.js';
import { alerting } from './alerts.js';
import type { ActivityDeps } from './deps.js';
import { effectRetryOf } from './effect-input.js';
import { noMetrics } from './metrics.js';

/** A window's commit, as recorded: what its result reports. */
export interface Committed {
  readonly counts: WindowCounts;
  readonly watermark: Date | undefined;
  /** Alert deliveries recorded with the commit (its recovery notice, its findings' alerts). */
  readonly alerted: readonly string[];
  readonly effects: readonly string[];
  readonly effectRetry: Readonly<Record<string, ReturnType<typeof effectRetryOf>>>;
  readonly findings: NonNullable<WindowCounts['findings']>;
}

export function windowCommit(deps: ActivityDeps) {
  const alerts = alerting(deps);
  const redact = deps.redact ?? ((t: string) => t);
  const metrics = deps.metrics ?? noMetrics;
  return {
    /** Records, inside the window's transaction, what its commit brings besides its marker. */
    async record(
      trx: Transaction<Database>,
      w: WindowRef,
      counts: WindowCounts,
      attempts: number,
      policy: ActivityPolicy,
      run: { workflowId: string | null; runId: string | null },
    ): Promise<Omit<Committed, 'counts' | 'watermark'>> {
      await recordEffects(
        trx,
        (counts.effects ?? []).map((e) => ({
          key: `${w.key}:${e.name}`,
          job: w.job,
          windowKey: w.key,
          name: e.name,
          channel: e.channel,
          policy: e.policy ?? 'ask',
          request: e.request,
          providerKey: `${w.key}:${e.name}`,
          retry: e.retry ? effectRetryOf(policy.retry, e.retry) : null,
        })),
      );
      // Earlier attempts failed: if that opened an incident, it closes with this commit.
      const recovery =
        attempts > 1
          ? await alerts.resolve(trx, {
              job: w.job,
              subject: w.key,
              note: `window processed on attempt ${attempts}`,
            })
          : null;
      // Findings alert although the window committed. Their incidents and the recovery notice
      // are recorded with the commit, so a retry that finds the window done still sends them.
      const alerted = [...(recovery?.deliveries ?? [])];
      for (const r of counts.recovered ?? []) {
        const closed = await alerts.resolve(trx, { job: w.job, subject: r.subject, note: r.note });
        alerted.push(...(closed?.deliveries ?? []));
      }
      for (const f of counts.findings ?? []) {
        const raised = await alerts.raise(trx, {
          job: w.job,
          subject: `${w.key}:${f.subject}`,
          kind: 'finding',
          error: f.message,
          attempts,
          ...(run.workflowId ? { workflowId: run.workflowId } : {}),
          ...(run.runId ? { runId: run.runId } : {}),
        });
        alerted.push(...raised.deliveries);
      }
      await recordWindowNotices(trx, w.key, alerted);
      return {
        alerted,
        effects: (counts.effects ?? []).map((e) => `${w.key}:${e.name}`),
        effectRetry: Object.fromEntries(
          (counts.effects ?? [])
            .filter((e) => e.retry)
            .map((e) => [`${w.key}:${e.name}`, effectRetryOf(policy.retry, e.retry!)]),
        ),
        findings: counts.findings ?? [],
      };
    },

    /** The committed window's outcome line and metric, and its result. */
    processed(
      w: Pick<WindowRef, 'job' | 'key' | 'generation'>,
      c: Committed,
      attempt: number,
      seconds: number,
    ): WindowResult {
      const { counts } = c;
      deps.logger.info(
        `PROCESSED job=${w.job} window=${w.key} input=${counts.input} applied=${counts.applied} quarantined=${counts.quarantined}`,
        {
          job: w.job,
          window: w.key,
          generation: w.generation,
          outcome: 'processed',
          attempt,
          input: counts.input,
          applied: counts.applied,
          quarantined: counts.quarantined,
        },
      );
      metrics.window({ job: w.job, outcome: 'processed', seconds });
      return {
        key: w.key,
        outcome: 'processed',
        counts: { input: counts.input, applied: counts.applied, quarantined: counts.quarantined },
        watermark: c.watermark ? isoUtc(c.watermark) : null,
        effects: c.effects,
        ...(Object.keys(c.effectRetry).length > 0 ? { effectRetry: c.effectRetry } : {}),
        alerts: c.alerted,
        findings: c.findings.map((f) => ({ subject: `${w.key}:${f.subject}`, message: redact(f.message) })),
      };
    },
  };
}
