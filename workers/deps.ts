// Builds the activities' dependencies from the parsed configuration, for every entry point.
import { directoryOf } from '../config/people.js';
import type { Client } from '@temporalio/client';
import type { Kysely } from 'kysely';
import type { ActivityDeps } from '../activities/deps.js';
import { consoleLogger, type LogFields, type Logger } from '../activities/logger.js';
import { channelsFromConfig, redactorFromConfig } from './channels.js';
import type { Config } from '../config/env.js';
import type { Database } from '../db/schema.js';
import type { Catalog } from '../schedules/job.js';

/** A logger that never prints a secret, whatever the message or its fields carry. */
export function redactingLogger(inner: Logger, redact: (s: string) => string): Logger {
  const clean = (fields: LogFields | undefined): LogFields | undefined =>
    fields &&
    Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, typeof v === 'string' ? redact(v) : v]));
  return {
    info: (m, f) => inner.info(redact(m), clean(f)),
    warn: (m, f) => inner.warn(redact(m), clean(f)),
    error: (m, f) => inner.error(redact(m), clean(f)),
  };
}

export function buildDeps(
  config: Config,
  parts: { db: Kysely<Database>; catalog: Catalog; client?: Client; logger?: Logger },
): ActivityDeps {
  const redact = redactorFromConfig(config);
  return {
    db: parts.db,
    catalog: parts.catalog,
    logger: redactingLogger(parts.logger ?? consoleLogger(), redact),
    now: () => new Date(),
    channels: channelsFromConfig(config),
    redact,
    alertDefaults: {
      email: config.TIDEMARK_ALERT_EMAIL,
      slack: config.TIDEMARK_ALERT_SLACK,
      telegram: config.TIDEMARK_ALERT_TELEGRAM,
    },
    webUi: { url: config.TIDEMARK_WEB_UI_URL, namespace: config.TEMPORAL_NAMESPACE },
    ...(config.TIDEMARK_WEB_URL ? { pageUrl: config.TIDEMARK_WEB_URL } : {}),
    approvals: {
      ...(config.TIDEMARK_APPROVAL_SLACK_CHANNEL
        ? { slackChannel: config.TIDEMARK_APPROVAL_SLACK_CHANNEL }
        : {}),
      ...(config.SLACK_SIGNING_SECRET ? { groupProofSecret: config.SLACK_SIGNING_SECRET } : {}),
      // Who may decide reruns: this worker's own rule, not what a request says of itself.
      policy: {
        approvers: directoryOf(config).approvers,
        ...(config.TIDEMARK_APPROVER_GROUP ? { approverGroup: config.TIDEMARK_APPROVER_GROUP } : {}),
        allowSelfApproval: config.TIDEMARK_ALLOW_SELF_APPROVAL,
        ...(config.TIDEMARK_DECISION_KEY ? { requireProof: true } : {}),
      },
      ...(config.TIDEMARK_DECISION_KEY ? { decisionKey: config.TIDEMARK_DECISION_KEY } : {}),
    },
    ...(parts.client ? { temporal: { client: parts.client, taskQueue: config.TIDEMARK_TASK_QUEUE } } : {}),
  };
}
