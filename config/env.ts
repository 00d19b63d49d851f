// Configuration from the environment, parsed once per entry point into a frozen object.
// An error names the variable and says how to fix it.
import { z } from 'zod';
import { payloadKeysFrom } from '../codec/keys.js';
import { parseDuration } from '../schedules/duration.js';
import { ConfigError } from '../contract/config-error.js';
import { checkSchemaName, DEFAULT_SCHEMA } from '../db/ledger-schema.js';
import { directoryOf, parsePeople, type Person } from './people.js';
import { parseRoleMap, type RoleGrant } from '../contract/roles.js';
import { resolveTemporal, temporalSecrets, type TemporalSettings } from './temporal.js';

export { ConfigError };

const RETENTION_KINDS = ['runs', 'attempts', 'incidents', 'quarantine', 'markers'];

/** The topics docs/reference/environment.md groups the variables by, in its order. */
export const ENV_TOPICS = {
  database: 'Database',
  temporal: 'Temporal and workers',
  catalog: 'Catalog and CLI',
  web: 'Management page and sign-in',
  approvals: 'Reruns and approvals',
  alerts: 'Alerts',
  slack: 'Slack',
  effects: 'Effects',
  backups: 'Backups',
  housekeeping: 'Housekeeping',
  logs: 'Logs',
  observability: 'Metrics and tracing',
  encryption: 'Payload encryption',
  demo: 'Demo and tidemark dev',
} as const;
export type EnvTopic = keyof typeof ENV_TOPICS;
/** The processes: `tidemark worker`, `tidemark web` (the page), the CLI commands, `tidemark slack`, `tidemark dev`. */
export type EnvReader = 'worker' | 'page' | 'CLI' | 'Slack app' | 'dev';

/** What a variable is for: its schema's metadata here, a row of config/env-elsewhere.ts otherwise. */
export interface EnvDoc {
  readonly topic: EnvTopic;
  readonly description: string;
  /** The processes that use it; absent: every one. */
  readonly readBy?: readonly EnvReader[];
  /** What happens when it is unset, for a variable whose schema has no default. */
  readonly unset?: string;
}

const doc = (
  topic: EnvTopic,
  description: string,
  more: Omit<EnvDoc, 'topic' | 'description'> = {},
): EnvDoc & Record<string, unknown> => ({ topic, description, ...more });

const WORKER_PAGE_SLACK: EnvReader[] = ['worker', 'page', 'Slack app', 'dev'];

/** The configuration every process parses; each variable's metadata (`.meta()`) documents it. */
export const envSchema = z.object({
  DATABASE_URL: z
    .string()
    .regex(
      /^postgres(ql)?:\/\//,
      'must be a postgres:// URL, e.g. postgres://postgres@127.0.0.1:5432/tidemark',
    )
    .default('postgres://postgres@127.0.0.1:5432/tidemark')
    .meta(
      doc(
        'database',
        "The PostgreSQL database that holds tidemark's ledger and the jobs' own tables; its sslmode, sslrootcert, sslcert and sslkey parameters outrank the PGSSL* variables.",
      ),
    ),
  TIDEMARK_SCHEMA: z
    .string()
    .default(DEFAULT_SCHEMA)
    .meta(
      doc(
        'database',
        "The schema of DATABASE_URL's database that holds tidemark's own tables (db/ledger-schema.ts).",
      ),
    ),
  // Checked (host:port, IPv6 in brackets too) where it is resolved, with a profile's address.
  TEMPORAL_ADDRESS: z
    .string()
    .optional()
    .meta(
      doc(
        'temporal',
        "Temporal's frontend, host:port. Resolved with the other TEMPORAL_* settings and a TOML profile in config/temporal.ts.",
        { unset: "the profile's address, else the dev server on 127.0.0.1:TEMPORAL_PORT" },
      ),
    ),
  TEMPORAL_NAMESPACE: z
    .string()
    .min(1)
    .default('default')
    .meta(doc('temporal', 'The Temporal namespace (a profile may name it too; the variable wins).')),
  TIDEMARK_TASK_QUEUE: z
    .string()
    .min(1)
    .default('tidemark')
    .meta(doc('temporal', "The task queue of the jobs' workflows and activities.")),
  TIDEMARK_WATCH_TASK_QUEUE: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('temporal', "The lag watch's own task queue; it must differ from TIDEMARK_TASK_QUEUE.", {
        unset: 'TIDEMARK_TASK_QUEUE + "-watch"',
        readBy: ['worker', 'CLI', 'dev'],
      }),
    ),
  TIDEMARK_WORKER_ROLE: z
    .enum(['all', 'jobs', 'watch'], 'must be all, jobs or watch')
    .default('all')
    .meta(
      doc(
        'temporal',
        "What a worker polls: both queues (all), the job queue only (jobs), or the watch's only (watch).",
        { readBy: ['worker'] },
      ),
    ),
  TEMPORAL_UI_PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(8233)
    .meta(
      doc('demo', "The port of the Temporal dev server's Web UI that tidemark dev starts.", {
        readBy: ['dev'],
      }),
    ),
  TEMPORAL_PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(7233)
    .meta(
      doc(
        'temporal',
        "The port of the dev server on 127.0.0.1 that tidemark dev starts, and every process's address when neither TEMPORAL_ADDRESS nor a profile names one.",
      ),
    ),
  TIDEMARK_STATE_DIR: z
    .string()
    .min(1)
    .default('.tidemark')
    .meta(
      doc(
        'temporal',
        "The directory of local state: the dev server's database (tidemark dev), the built-in backups' files and housekeeping's quarantine exports.",
      ),
    ),
  TEMPORAL_CLI: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('demo', 'The Temporal CLI that tidemark dev runs as its dev server.', {
        unset: '`temporal` on PATH, then the project-local one',
        readBy: ['dev'],
      }),
    ),
  TIDEMARK_DEMO_MARKETPLACE_URL: z
    .url()
    .default('http://127.0.0.1:8299/demo-shop')
    .meta(
      doc(
        'demo',
        'Where the demo marketplace job pushes; tidemark dev runs a simulator there for the demo.',
        {
          readBy: ['worker', 'dev'],
        },
      ),
    ),
  TIDEMARK_APPROVERS: z
    .string()
    .optional()
    .transform(people(false))
    .meta(
      doc(
        'approvals',
        'Who may approve reruns and effects: comma-separated names, or name=SlackUserId pairs, so one person is the same in the CLI (--by or $USER), the page and Slack.',
        { unset: 'nobody is an approver by name', readBy: WORKER_PAGE_SLACK },
      ),
    ),
  TIDEMARK_PEOPLE: z
    .string()
    .optional()
    .transform(people(true))
    .meta(
      doc(
        'approvals',
        'Everyone else who requests or decides from Slack: comma-separated name=SlackUserId pairs.',
        {
          readBy: ['page', 'Slack app', 'dev'],
        },
      ),
    ),
  TIDEMARK_APPROVAL_SLACK_CHANNEL: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('slack', 'Slack channel where rerun requests are posted with Approve / Reject buttons.', {
        unset: 'requests are not posted to Slack',
        readBy: ['worker', 'dev'],
      }),
    ),
  SLACK_SIGNING_SECRET: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('slack', "The Slack app's signing secret: requests without a valid signature are refused.", {
        readBy: ['Slack app', 'dev'],
      }),
    ),
  SLACK_APP_PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(3000)
    .meta(
      doc('slack', "The port the Slack app listens on for Slack's requests.", {
        readBy: ['Slack app', 'dev'],
      }),
    ),
  TIDEMARK_APPROVER_GROUP: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc(
        'slack',
        'A Slack user group (id, e.g. S0123ABC) whose members may approve too; checked by the Slack app.',
        {
          readBy: ['worker', 'Slack app', 'dev'],
        },
      ),
    ),
  TIDEMARK_ALLOW_SELF_APPROVAL: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .meta(
      doc('approvals', 'true: the person who requested a rerun may approve it too (a team of one).', {
        readBy: WORKER_PAGE_SLACK,
      }),
    ),
  TIDEMARK_RERUN_TIMEOUT: z
    .string()
    .regex(/^\d+(s|m|h|d)$/, 'a duration such as "24h"')
    .default('24h')
    .meta(
      doc('approvals', 'How long a rerun request waits for a decision.', {
        readBy: ['page', 'CLI', 'Slack app', 'dev'],
      }),
    ),
  TIDEMARK_WEB_PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(8090)
    .meta(doc('web', 'The port of the management page.', { readBy: ['page', 'dev'] })),
  TIDEMARK_WEB_HOST: z
    .string()
    .regex(/^[0-9A-Za-z.:-]+$/, 'an address or host name to listen on, e.g. 127.0.0.1 or 0.0.0.0')
    .default('127.0.0.1')
    .meta(
      doc(
        'web',
        'The address the page listens on: loopback unless told (0.0.0.0 in a container, behind a TLS proxy).',
        { readBy: ['page', 'dev'] },
      ),
    ),
  TIDEMARK_WEB_TOKEN: z
    .string()
    .min(12, 'use at least 12 characters')
    .optional()
    .meta(
      doc(
        'web',
        'The token that opens the page in single-user mode (no TIDEMARK_OIDC_ISSUER); at least 12 characters.',
        {
          unset: 'tidemark dev makes one; tidemark web needs it or TIDEMARK_OIDC_ISSUER',
          readBy: ['page', 'dev'],
        },
      ),
    ),
  TIDEMARK_WEB_TRUST_PROXY: z
    .string()
    .regex(
      /^(\d+|[0-9A-Fa-f.:/]+(\s*,\s*[0-9A-Fa-f.:/]+)*)$/,
      "a number of proxy hops, or the proxies' addresses or networks, comma-separated, e.g. 10.0.0.5 or 10.0.0.0/8,127.0.0.1",
    )
    .optional()
    .meta(
      doc(
        'web',
        "The TLS proxy in front of the page: its address or network (comma-separated), or a number of hops. The page then takes the client's address from X-Forwarded-For (throttles key on it) and its scheme from X-Forwarded-Proto.",
        { unset: 'those headers are not believed', readBy: ['page', 'dev'] },
      ),
    ),
  TIDEMARK_WEB_SESSION_TTL: z
    .string()
    .regex(/^[1-9]\d*(s|m|h|d)$/, 'a duration such as "12h"')
    .default('12h')
    .meta(doc('web', 'How long a login to the management page lasts.', { readBy: ['page', 'dev'] })),
  TIDEMARK_WEB_MAX_BACKFILL_WINDOWS: z.coerce
    .number()
    .int()
    .min(1)
    .default(1000)
    .meta(
      doc('web', 'A backfill from the page covering more windows than this needs an explicit "allowLarge".', {
        readBy: ['page', 'dev'],
      }),
    ),
  TIDEMARK_WEB_UI_URL: z
    .url()
    .default('http://127.0.0.1:8233')
    .meta(
      doc(
        'alerts',
        "Base of links to runs (the Temporal Web UI) in alerts and on the page; its origin is the codec server's default allowed origin.",
        { readBy: ['worker', 'page', 'dev'] },
      ),
    ),
  TIDEMARK_PAYLOAD_KEYS: z
    .string()
    .optional()
    .meta(
      doc(
        'encryption',
        'Payload encryption keys (codec/keys.ts checks them): "id:base64,id:base64" (or one a line), the first encrypts, all decrypt.',
        { unset: 'payloads are not encrypted (unless TIDEMARK_PAYLOAD_KEYS_FILE is set)' },
      ),
    ),
  TIDEMARK_PAYLOAD_KEYS_FILE: z
    .string()
    .optional()
    .meta(
      doc('encryption', 'A file holding the same list of keys as TIDEMARK_PAYLOAD_KEYS; both may be set.'),
    ),
  TIDEMARK_CODEC_ORIGINS: z
    .string()
    .optional()
    .transform((text, ctx) => {
      const origins: string[] = [];
      for (const item of list(text)) {
        let origin = '';
        try {
          origin = new URL(item).origin;
        } catch {
          // named below
        }
        if (!origin || origin === 'null' || origin !== item.replace(/\/$/, '')) {
          ctx.addIssue({
            code: 'custom',
            message: `${JSON.stringify(item)} is not an origin; write scheme://host:port, e.g. http://127.0.0.1:8233`,
          });
          return z.NEVER;
        }
        origins.push(origin);
      }
      return origins;
    })
    .meta(
      doc(
        'encryption',
        "The codec server (/codec/decode, /codec/encode on the page's port): the origins of the Temporal Web UIs that may call it, comma-separated.",
        { unset: 'the origin of TIDEMARK_WEB_UI_URL', readBy: ['page', 'dev'] },
      ),
    ),
  TIDEMARK_CODEC_TOKEN: z
    .string()
    .min(16, 'use at least 16 characters')
    .optional()
    .meta(
      doc(
        'encryption',
        'A bearer token that opens the codec endpoints only (for `temporal --codec-auth`); at least 16 characters.',
        { readBy: ['page', 'dev'] },
      ),
    ),
  TIDEMARK_METRICS_PORT: z.coerce
    .number()
    .int()
    .min(0)
    .max(65535)
    .optional()
    .meta(
      doc(
        'observability',
        "The port of the worker's probe server (/metrics, /healthz, /readyz); 0: any free one.",
        {
          unset: '9464, or any free port when another process on the host has it',
          readBy: ['worker', 'dev'],
        },
      ),
    ),
  TIDEMARK_METRICS_HOST: z
    .string()
    .min(1)
    .default('0.0.0.0')
    .meta(
      doc(
        'observability',
        "The address the worker's probe server listens on (0.0.0.0 so that Prometheus and the kubelet reach it in a container).",
        { readBy: ['worker', 'dev'] },
      ),
    ),
  TIDEMARK_METRICS_TOKEN: z
    .string()
    .min(12, 'use at least 12 characters')
    .optional()
    .meta(
      doc(
        'observability',
        "The scrape token: /metrics (a worker's probe server, the page's) answers `Authorization: Bearer <it>`; the page also answers a logged-in person. Health probes stay open.",
        { unset: '/metrics is open', readBy: ['worker', 'page', 'dev'] },
      ),
    ),
  TIDEMARK_OIDC_ISSUER: z
    .url()
    .optional()
    .meta(
      doc(
        'web',
        "Sign-in through the company's identity provider (OpenID Connect, authorization code with PKCE): its issuer URL; https unless on this machine.",
        { unset: 'the page runs in single-user mode, opened by TIDEMARK_WEB_TOKEN', readBy: ['page', 'dev'] },
      ),
    ),
  TIDEMARK_OIDC_CLIENT_ID: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('web', 'The client id the identity provider gave the page; required with TIDEMARK_OIDC_ISSUER.', {
        readBy: ['page', 'dev'],
      }),
    ),
  TIDEMARK_OIDC_CLIENT_SECRET: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('web', "The page's client secret, for a confidential client.", {
        unset: 'a public client',
        readBy: ['page', 'dev'],
      }),
    ),
  TIDEMARK_WEB_URL: z
    .url()
    .optional()
    .meta(
      doc(
        'web',
        "The page's address as browsers reach it: the identity provider sends them back to <it>/auth/callback; required with TIDEMARK_OIDC_ISSUER. The CLI's `tidemark login` uses it too.",
        { readBy: ['page', 'CLI', 'dev'] },
      ),
    ),
  TIDEMARK_OIDC_SCOPES: z
    .string()
    .min(1)
    .default('openid profile email groups')
    .meta(
      doc('web', 'The scopes the page asks the identity provider for, space-separated.', {
        readBy: ['page', 'dev'],
      }),
    ),
  TIDEMARK_OIDC_NAME_CLAIM: z
    .string()
    .min(1)
    .default('preferred_username')
    .meta(
      doc(
        'web',
        'The claim that names a person in tidemark (as in TIDEMARK_APPROVERS and TIDEMARK_PEOPLE).',
        {
          readBy: ['page', 'dev'],
        },
      ),
    ),
  TIDEMARK_OIDC_ROLES_CLAIM: z
    .string()
    .min(1)
    .default('groups')
    .meta(doc('web', "The claim that lists a person's groups.", { readBy: ['page', 'dev'] })),
  TIDEMARK_OIDC_ROLES: z
    .string()
    .optional()
    .transform((text, ctx): RoleGrant[] => {
      const parsed = parseRoleMap(text);
      if (typeof parsed !== 'string') return parsed;
      ctx.addIssue({ code: 'custom', message: parsed });
      return z.NEVER;
    })
    .meta(
      doc(
        'web',
        'Which group gives which role: group=role pairs, comma-separated (roles viewer, operator, approver, admin); required with TIDEMARK_OIDC_ISSUER.',
        { readBy: ['page', 'dev'] },
      ),
    ),
  TIDEMARK_DECISION_KEY: z
    .string()
    .min(32, 'use at least 32 characters, e.g. openssl rand -hex 32')
    .optional()
    .meta(
      doc(
        'approvals',
        'The key the page and the Slack app sign each decision with, and the workers check it by: set, a worker takes a rerun decision only with a valid signature (a client with raw access to Temporal cannot approve). At least 32 characters, e.g. `openssl rand -hex 32`.',
        { unset: 'decisions are not signed', readBy: WORKER_PAGE_SLACK },
      ),
    ),
  SMTP_HOST: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('alerts', 'The SMTP server that sends alert and report e-mails.', {
        unset: 'no e-mail is sent',
        readBy: ['worker', 'dev'],
      }),
    ),
  SMTP_PORT: z.coerce
    .number()
    .int()
    .min(1)
    .max(65535)
    .default(587)
    .meta(doc('alerts', "The SMTP server's port.", { readBy: ['worker', 'dev'] })),
  SMTP_SECURE: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .meta(
      doc('alerts', 'true: TLS from the first byte (port 465); false: STARTTLS when the server offers it.', {
        readBy: ['worker', 'dev'],
      }),
    ),
  SMTP_TLS_REJECT_UNAUTHORIZED: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true')
    .meta(
      doc('alerts', "false: accept an SMTP server's certificate that does not verify (a test server only).", {
        readBy: ['worker', 'dev'],
      }),
    ),
  SMTP_USER: z
    .string()
    .min(1)
    .optional()
    .meta(doc('alerts', 'The SMTP login.', { unset: 'no authentication', readBy: ['worker', 'dev'] })),
  SMTP_PASSWORD: z
    .string()
    .min(1)
    .optional()
    .meta(doc('alerts', "The SMTP login's password.", { readBy: ['worker', 'dev'] })),
  SMTP_FROM: z
    .string()
    .min(3)
    .default('tidemark <tidemark@localhost>')
    .meta(doc('alerts', 'The From of the e-mails tidemark sends.', { readBy: ['worker', 'dev'] })),
  SLACK_BOT_TOKEN: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('slack', "The Slack bot's token (xoxb-...): alerts, effects and rerun requests post with it.", {
        unset: 'nothing is posted to Slack',
        readBy: ['worker', 'Slack app', 'dev'],
      }),
    ),
  SLACK_API_URL: z
    .url()
    .default('https://slack.com/api')
    .meta(
      doc('slack', "Slack's Web API (a test server's in tests).", { readBy: ['worker', 'Slack app', 'dev'] }),
    ),
  TELEGRAM_BOT_TOKEN: z
    .string()
    .min(1)
    .optional()
    .meta(
      doc('alerts', "The Telegram bot's token: alerts and effects to Telegram chats go out with it.", {
        unset: 'nothing is sent to Telegram',
        readBy: ['worker', 'dev'],
      }),
    ),
  TELEGRAM_API_URL: z
    .url()
    .default('https://api.telegram.org')
    .meta(doc('alerts', "Telegram's Bot API (a test server's in tests).", { readBy: ['worker', 'dev'] })),
  TIDEMARK_ALERT_EMAIL: z
    .string()
    .optional()
    .transform(list)
    .meta(
      doc('alerts', 'E-mail addresses (comma-separated) alerted for jobs that name no alert channel.', {
        unset: 'tidemark dev: ops@localhost',
        readBy: ['worker', 'dev'],
      }),
    ),
  TIDEMARK_ALERT_SLACK: z
    .string()
    .optional()
    .transform(list)
    .meta(
      doc('alerts', 'Slack channels (comma-separated) alerted for jobs that name no alert channel.', {
        readBy: ['worker', 'dev'],
      }),
    ),
  TIDEMARK_ALERT_TELEGRAM: z
    .string()
    .optional()
    .transform(list)
    .meta(
      doc('alerts', 'Telegram chat ids (comma-separated) alerted for jobs that name no alert channel.', {
        readBy: ['worker', 'dev'],
      }),
    ),
  TIDEMARK_LOG_FORMAT: z
    .enum(['json', 'pretty'])
    .optional()
    .meta(
      doc('logs', 'Log lines: JSON (one object a line) or pretty.', {
        unset: 'json for the workers, pretty for tidemark dev',
        readBy: ['worker', 'dev'],
      }),
    ),
  TIDEMARK_LOG_LEVEL: z
    .string()
    .toLowerCase()
    .pipe(z.enum(['trace', 'debug', 'info', 'warn', 'error']))
    .default('info')
    .meta(
      doc('logs', "tidemark's own log level: trace, debug, info, warn or error.", {
        readBy: ['worker', 'dev'],
      }),
    ),
  TIDEMARK_SDK_LOG_LEVEL: z
    .string()
    .toUpperCase()
    .pipe(z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR']))
    .default('WARN')
    .meta(
      doc('logs', "The Temporal SDK's own lines (worker, activity and workflow lifecycle).", {
        readBy: ['worker', 'dev'],
      }),
    ),
  TIDEMARK_HOUSEKEEPING: z
    .enum(['on', 'off'], 'must be on or off')
    .default('on')
    .meta(
      doc('housekeeping', 'The built-in housekeeping job: on unless "off".', {
        readBy: ['worker', 'CLI', 'dev'],
      }),
    ),
  TIDEMARK_HOUSEKEEPING_RETENTION: z
    .string()
    .optional()
    .transform(retention)
    .meta(
      doc(
        'housekeeping',
        `Retention per kind (${RETENTION_KINDS.join(', ')}), e.g. "runs=90d,attempts=90d,incidents=180d,quarantine=90d"; at least 1d each.`,
        { unset: 'each kind keeps its default', readBy: ['worker', 'CLI', 'dev'] },
      ),
    ),
  TIDEMARK_HOUSEKEEPING_BATCH_SIZE: z.coerce
    .number()
    .int('must be a whole number')
    .min(1, 'must be at least 1')
    .max(100_000, 'must be at most 100000, so one delete stays short')
    .optional()
    .meta(
      doc('housekeeping', 'Rows per delete transaction of the housekeeping job (1 to 100000).', {
        unset: '5000',
        readBy: ['worker', 'CLI', 'dev'],
      }),
    ),
});
const schema = envSchema;

const DAY_MS = 86_400_000;

function retention(
  text: string | undefined,
  ctx: z.RefinementCtx,
): Partial<Record<'runs' | 'attempts' | 'incidents' | 'quarantine' | 'markers', string>> | undefined {
  if (text === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const pair of list(text)) {
    const [kind, value, extra] = pair.split('=').map((s) => s.trim());
    if (
      !kind ||
      !RETENTION_KINDS.includes(kind) ||
      !value ||
      extra !== undefined ||
      !/^\d+(ms|s|m|h|d)$/.test(value)
    ) {
      ctx.addIssue({
        code: 'custom',
        message: `"${pair}" is not kind=duration: use e.g. "runs=90d,quarantine=30d" with kinds ${RETENTION_KINDS.join(', ')}`,
      });
      return z.NEVER;
    }
    if (parseDuration(value)! < DAY_MS) {
      ctx.addIssue({
        code: 'custom',
        message: `"${pair}" is under a day: a retention must be at least 1d ("m" is minutes; use e.g. "${kind}=90d")`,
      });
      return z.NEVER;
    }
    out[kind] = value;
  }
  return out;
}

function people(pairsOnly: boolean) {
  return (text: string | undefined, ctx: z.RefinementCtx): Person[] => {
    const parsed = parsePeople(text, pairsOnly);
    if (typeof parsed !== 'string') return parsed;
    ctx.addIssue({ code: 'custom', message: parsed });
    return z.NEVER;
  };
}

function list(text: string | undefined): string[] {
  return (text ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function payloadKeyMaterial(config: Config): string[] {
  const raw = (config.TIDEMARK_PAYLOAD_KEYS ?? '')
    .split(/[,\n]/)
    .map((k) => k.slice(k.indexOf(':') + 1).trim());
  try {
    const keys = payloadKeysFrom({
      TIDEMARK_PAYLOAD_KEYS: config.TIDEMARK_PAYLOAD_KEYS,
      TIDEMARK_PAYLOAD_KEYS_FILE: config.TIDEMARK_PAYLOAD_KEYS_FILE,
    });
    return [...raw, ...[...(keys?.byId.values() ?? [])].map((k) => k.key.toString('base64'))];
  } catch {
    return raw;
  }
}

/** The values that must never reach a log line, an alert or a workflow payload. */
export function secretsOf(config: Config): string[] {
  const fromUrl = (() => {
    try {
      const u = new URL(config.DATABASE_URL);
      return [decodeURIComponent(u.password), u.searchParams.get('password') ?? ''];
    } catch {
      return [];
    }
  })();
  return [
    config.SMTP_PASSWORD,
    config.SLACK_BOT_TOKEN,
    config.SLACK_SIGNING_SECRET,
    config.TIDEMARK_WEB_TOKEN,
    config.TIDEMARK_CODEC_TOKEN,
    config.TIDEMARK_METRICS_TOKEN,
    config.TIDEMARK_OIDC_CLIENT_SECRET,
    config.TIDEMARK_DECISION_KEY,
    config.TELEGRAM_BOT_TOKEN,
    ...(config.temporal ? temporalSecrets(config.temporal) : []),
    ...Object.values(config.effectSecrets ?? {}),
    ...fromUrl,
    // Every payload key, as the codec reads them (the variable's, one a line or comma-separated, and
    // the file's); the raw entries too, in case a key is refused and never parsed.
    ...payloadKeyMaterial(config),
  ].filter((s): s is string => !!s && s.length >= 4);
}

export type Config = Readonly<
  z.infer<typeof schema> & {
    /** How to reach Temporal: config/temporal.ts connects with it (and describes it without secrets). */
    temporal: TemporalSettings;
    /** The secrets jobs' HTTP effects name in their headers: TIDEMARK_SECRET_<NAME>, by NAME. */
    effectSecrets: Readonly<Record<string, string>>;
  }
>;

const SECRET_PREFIX = 'TIDEMARK_SECRET_';

/** TIDEMARK_SECRET_<NAME> variables by NAME (empty ones left out). */
function effectSecretsOf(env: NodeJS.ProcessEnv): Readonly<Record<string, string>> {
  return Object.freeze(
    Object.fromEntries(
      Object.entries(env)
        .filter(([k, v]) => k.startsWith(SECRET_PREFIX) && k.length > SECRET_PREFIX.length && !!v)
        .map(([k, v]) => [k.slice(SECRET_PREFIX.length), v!]),
    ),
  );
}

/** The task queue the lag watch's schedule starts it on; its own, so losing the job workers is still reported. */
export function watchQueueOf(
  config: Pick<Config, 'TIDEMARK_TASK_QUEUE' | 'TIDEMARK_WATCH_TASK_QUEUE'>,
): string {
  return config.TIDEMARK_WATCH_TASK_QUEUE ?? `${config.TIDEMARK_TASK_QUEUE}-watch`;
}

/** The task queues a worker of this configuration polls. */
export function pollQueues(config: Config): string[] {
  const role = config.TIDEMARK_WORKER_ROLE;
  return [
    ...(role === 'watch' ? [] : [config.TIDEMARK_TASK_QUEUE]),
    ...(role === 'jobs' ? [] : [watchQueueOf(config)]),
  ];
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const picked = Object.fromEntries(
    Object.keys(schema.shape).map((k) => [k, env[k] === '' ? undefined : env[k]]),
  );
  const parsed = schema.safeParse(picked);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(String(issue.path[0]), issue.message);
  }
  if (parsed.data.TIDEMARK_WATCH_TASK_QUEUE === parsed.data.TIDEMARK_TASK_QUEUE)
    throw new ConfigError(
      'TIDEMARK_WATCH_TASK_QUEUE',
      'must differ from TIDEMARK_TASK_QUEUE, so the watch still runs when every job worker is gone',
    );
  checkSchemaName(parsed.data.TIDEMARK_SCHEMA);
  const oidcSet = (['TIDEMARK_OIDC_CLIENT_ID', 'TIDEMARK_OIDC_CLIENT_SECRET'] as const).find(
    (n) => parsed.data[n],
  );
  if (!parsed.data.TIDEMARK_OIDC_ISSUER && oidcSet)
    throw new ConfigError(
      'TIDEMARK_OIDC_ISSUER',
      `${oidcSet} is set but the issuer is not: set TIDEMARK_OIDC_ISSUER to sign people in through the identity provider, or unset ${oidcSet} for single-user mode (the shared token, every role)`,
    );
  if (parsed.data.TIDEMARK_OIDC_ISSUER) {
    const issuer = new URL(parsed.data.TIDEMARK_OIDC_ISSUER);
    if (issuer.protocol !== 'https:' && !['127.0.0.1', 'localhost', '[::1]'].includes(issuer.hostname))
      throw new ConfigError(
        'TIDEMARK_OIDC_ISSUER',
        `use https (${issuer.origin} is plain http): sign-in answers travel over it; plain http only to a provider on this machine`,
      );
    for (const name of ['TIDEMARK_OIDC_CLIENT_ID', 'TIDEMARK_WEB_URL'] as const)
      if (!parsed.data[name])
        throw new ConfigError(
          name,
          name === 'TIDEMARK_WEB_URL'
            ? "set it to the page's address as browsers reach it (e.g. https://tidemark.example.com): TIDEMARK_OIDC_ISSUER is set, and the identity provider sends people back to <it>/auth/callback"
            : 'set it to the client id the identity provider gave the page: TIDEMARK_OIDC_ISSUER is set',
        );
    if (parsed.data.TIDEMARK_OIDC_ROLES.length === 0)
      throw new ConfigError(
        'TIDEMARK_OIDC_ROLES',
        "map the identity provider's groups to roles, e.g. tidemark-readers=viewer,tidemark-ops=operator,tidemark-leads=approver,platform=admin: without it nobody signed in could do anything",
      );
  }
  try {
    directoryOf(parsed.data);
  } catch (err) {
    throw new ConfigError('TIDEMARK_APPROVERS or TIDEMARK_PEOPLE', (err as Error).message);
  }
  // One source of truth: the address and namespace every part uses are the ones it connects with.
  const temporal = resolveTemporal(env, parsed.data.TEMPORAL_PORT);
  return Object.freeze({
    ...parsed.data,
    TEMPORAL_ADDRESS: temporal.addressSet ? temporal.address : undefined,
    TEMPORAL_NAMESPACE: temporal.namespace,
    temporal,
    effectSecrets: effectSecretsOf(env),
  });
}
