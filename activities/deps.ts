// What every activity is built from. Entry points build these; tests hand in their own.
import type { ApprovalPolicy } from '../contract/workflows.js';
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Catalog, Job } from '../schedules/job.js';
import type { ActivityPolicy } from '../contract/workflows.js';
import type { CrashPoint } from './crash-points.js';
import type { Logger } from './logger.js';
import type { MetricsSink } from './metrics.js';
import type { Channels } from './notify/provider.js';

export interface ActivityDeps {
  readonly db: Kysely<Database>;
  readonly catalog: Catalog;
  readonly logger: Logger;
  /** The wall clock; tests may pin it. */
  readonly now: () => Date;
  /** External channels; a missing one is "not configured". */
  readonly channels?: Channels;
  /** Removes secret values from text before it is logged, stored or alerted. */
  readonly redact?: (text: string) => string;
  /** Alert targets for jobs that name none. */
  readonly alertDefaults?: {
    email: readonly string[];
    slack: readonly string[];
    telegram: readonly string[];
  };
  /** Where links to runs point. */
  readonly webUi?: { url: string; namespace: string };
  /** The management page's address (TIDEMARK_WEB_URL): alerts link their runbook entry and window there. */
  readonly pageUrl?: string;
  /**
   * Where rerun requests are posted with Approve and Reject buttons (a Slack channel id), and the
   * secret that checks the Slack app's word that someone is in the approver group, and who may
   * decide reruns (this worker's configuration, checked when a decision arrives).
   */
  readonly approvals?: {
    slackChannel?: string;
    groupProofSecret?: string;
    policy?: ApprovalPolicy;
    /** TIDEMARK_DECISION_KEY: checks the page's and the Slack app's signatures over decisions. */
    decisionKey?: string;
  };
  /** Where window outcomes are counted (the process's /metrics); none: not counted. */
  readonly metrics?: MetricsSink;
  /** The Temporal client and task queue, for the watch's diagnosis (schedule state, pollers). */
  readonly temporal?: { client: Client; taskQueue: string };
  /**
   * Test seams, never installed in production: `afterEffect` is called between an effect and its
   * done marker; `crashPoint` at each named crash point (activities/crash-points.ts).
   */
  readonly hooks?: {
    afterEffect?: (key: string) => Promise<void> | void;
    crashPoint?: (point: CrashPoint, key: string) => Promise<void> | void;
  };
}

export function policyOf(job: Job): ActivityPolicy {
  return {
    retry: { ...job.retry },
    startToCloseTimeoutMs: job.attemptTimeoutMs,
    effectTimeoutMs: job.effectTimeoutMs,
    ...(job.heartbeatTimeoutMs ? { heartbeatTimeoutMs: job.heartbeatTimeoutMs } : {}),
    ...(job.settle ? { settles: true } : {}),
    ...(job.allowedHours ? { allowedHours: { ...job.allowedHours, timezone: job.timezone } } : {}),
  };
}
