// The environment variables tidemark reads outside config/env.ts's schema: Temporal's own (config/temporal.ts
// hands them to @temporalio/envconfig), libpq's (db/pg-target.ts, db/pg-libpq.ts), OpenTelemetry's
// (workers/tracing.ts), and a few read where they are used. scripts/docs-reference.ts writes them into
// docs/reference/environment.md with the schema's; test/unit/docs-reference.test.ts fails when a
// variable the source names is in neither.
import { SSL_MODES } from '../db/pg-target.js';
import type { EnvDoc } from './env.js';

export interface EnvElsewhere extends EnvDoc {
  /** The variable, or a family of them (`TEMPORAL_GRPC_META_<NAME>`). */
  readonly name: string;
  /** Where it is read. */
  readonly source: string;
  /** Its default, when it has one. */
  readonly default?: string;
}

const TEMPORAL = 'config/temporal.ts';
const PG = 'db/pg-target.ts';
const TRACING = 'workers/tracing.ts';

const refusedPg = (name: string, param: string): EnvElsewhere => ({
  name,
  source: PG,
  topic: 'database',
  description: `Refused when set (as \`${param}\` in DATABASE_URL is): pg_dump would apply it and the worker's node-postgres connections would not.`,
});
const libpqOnly = (name: string, source = 'db/pg-libpq.ts'): EnvElsewhere => ({
  name,
  source,
  topic: 'database',
  readBy: ['worker'],
  description:
    "Kept from pg_dump's environment: node-postgres does not read it, so the backup would connect otherwise than the worker.",
});

export const ENV_ELSEWHERE: readonly EnvElsewhere[] = [
  {
    name: 'PGSSLMODE',
    source: PG,
    topic: 'database',
    description: `TLS to PostgreSQL (${SSL_MODES.join(', ')}), for node-postgres and pg_dump alike; DATABASE_URL's sslmode outranks it.`,
    default: 'prefer',
  },
  {
    name: 'PGSSLROOTCERT',
    source: PG,
    topic: 'database',
    description:
      "The CA certificate that verifies the server (verify-ca, verify-full); DATABASE_URL's sslrootcert outranks it.",
    unset: '~/.postgresql/root.crt when it exists',
  },
  {
    name: 'PGSSLCERT',
    source: PG,
    topic: 'database',
    description: "The client certificate for PostgreSQL; DATABASE_URL's sslcert outranks it.",
    unset: '~/.postgresql/postgresql.crt when it exists',
  },
  {
    name: 'PGSSLKEY',
    source: PG,
    topic: 'database',
    description: "The client certificate's key (unencrypted, chmod 600); DATABASE_URL's sslkey outranks it.",
    unset: '~/.postgresql/postgresql.key when it exists',
  },
  {
    name: 'PGPASSWORD',
    source: 'db/pg-libpq.ts',
    topic: 'database',
    description: 'The password when DATABASE_URL has none; node-postgres and pg_dump both read it.',
  },
  {
    name: 'PGPASSFILE',
    source: PG,
    topic: 'database',
    description:
      "libpq's password file (both node-postgres and pg_dump read it); `passfile=` in DATABASE_URL is refused.",
    unset: '~/.pgpass',
  },
  refusedPg('PGSSLCRL', 'sslcrl'),
  refusedPg('PGSSLCRLDIR', 'sslcrldir'),
  refusedPg('PGSSLSNI', 'sslsni'),
  refusedPg('PGSSLMINPROTOCOLVERSION', 'ssl_min_protocol_version'),
  refusedPg('PGSSLMAXPROTOCOLVERSION', 'ssl_max_protocol_version'),
  refusedPg('PGSSLCERTMODE', 'sslcertmode'),
  refusedPg('PGCHANNELBINDING', 'channel_binding'),
  libpqOnly('PGHOSTADDR'),
  libpqOnly('PGTARGETSESSIONATTRS'),
  libpqOnly('PGREQUIREPEER'),
  libpqOnly('PGGSSENCMODE'),
  libpqOnly('PGREQUIRESSL'),
  libpqOnly('PGSERVICE'),
  libpqOnly('PGSERVICEFILE'),
  {
    name: 'TEMPORAL_API_KEY',
    source: TEMPORAL,
    topic: 'temporal',
    description:
      'An API key for Temporal Cloud (or a server that takes one); sent as a header, TLS on with it.',
  },
  {
    name: 'TEMPORAL_TLS',
    source: TEMPORAL,
    topic: 'temporal',
    description: 'TLS to Temporal on (true) or off (false); 1/0 and any case too, anything else is refused.',
    unset: 'TLS when a certificate, CA or API key is set',
  },
  ...(['CLIENT_CERT', 'CLIENT_KEY', 'SERVER_CA_CERT'] as const).flatMap((what): EnvElsewhere[] => {
    const words = {
      CLIENT_CERT: 'client certificate',
      CLIENT_KEY: "client certificate's key",
      SERVER_CA_CERT: "CA that verifies Temporal's certificate",
    }[what];
    return [
      {
        name: `TEMPORAL_TLS_${what}_PATH`,
        source: TEMPORAL,
        topic: 'temporal',
        description: `The file of the ${words} (PEM).`,
      },
      {
        name: `TEMPORAL_TLS_${what}_DATA`,
        source: TEMPORAL,
        topic: 'temporal',
        description: `The ${words} itself (PEM); give the file or the data, not both.`,
      },
    ];
  }),
  {
    name: 'TEMPORAL_TLS_SERVER_NAME',
    source: TEMPORAL,
    topic: 'temporal',
    description: "The name Temporal's certificate is checked against.",
    unset: "the address's host",
  },
  {
    name: 'TEMPORAL_TLS_DISABLE_HOST_VERIFICATION',
    source: TEMPORAL,
    topic: 'temporal',
    description: "true: do not check Temporal's certificate against its host name (true/false, 1/0).",
    default: 'false',
  },
  {
    name: 'TEMPORAL_GRPC_META_<NAME>',
    source: TEMPORAL,
    topic: 'temporal',
    description:
      'A gRPC header sent with every Temporal call (`<name>` lower case, its first `_` made `-`); printable ASCII.',
  },
  {
    name: 'TEMPORAL_CONFIG_FILE',
    source: TEMPORAL,
    topic: 'temporal',
    description:
      "A TOML file of Temporal profiles ([profile.<name>] tables, as the Temporal CLI's); it must be readable.",
    unset: '$XDG_CONFIG_HOME/temporalio/temporal.toml, else ~/.config/temporalio/temporal.toml, if it exists',
  },
  {
    name: 'TEMPORAL_PROFILE',
    source: TEMPORAL,
    topic: 'temporal',
    description: 'The profile of the TOML file to read; the TEMPORAL_* variables outrank its settings.',
    default: 'default',
  },
  {
    name: 'XDG_CONFIG_HOME',
    source: 'config/temporal.ts, cli/login.ts',
    topic: 'catalog',
    readBy: ['worker', 'page', 'CLI', 'Slack app', 'dev'],
    description:
      "Where the default Temporal config file (temporalio/temporal.toml) and the CLI's sign-in (tidemark/login.json) are.",
    unset: '~/.config',
  },
  {
    name: 'HOME',
    source: 'config/temporal.ts, db/pg-target.ts',
    topic: 'catalog',
    description: 'The home directory of ~/.config/temporalio/temporal.toml and ~/.postgresql/root.crt.',
  },
  {
    name: 'TIDEMARK_CATALOG',
    source: 'config/catalog-source.ts',
    topic: 'catalog',
    description: 'The job catalog module (a path, or `demo`); `--catalog` outranks it.',
    unset: './tidemark.config.js, .mjs or .ts, else the demo catalog',
  },
  {
    name: 'TIDEMARK_LOGIN_FILE',
    source: 'cli/login.ts',
    topic: 'catalog',
    readBy: ['CLI'],
    description: 'Where `tidemark login` keeps the sign-in to the page.',
    unset: '$XDG_CONFIG_HOME/tidemark/login.json',
  },
  {
    name: 'USER',
    source: 'cli/commands/rerun.ts, cli/commands/misc.ts',
    topic: 'catalog',
    readBy: ['CLI'],
    description: 'Who a CLI request or decision is recorded as, unless `--by` names someone.',
    unset: '`cli`',
  },
  {
    name: 'PATH',
    source: 'bin/temporal-cli.ts',
    topic: 'demo',
    readBy: ['dev'],
    description: 'Where tidemark dev looks for the `temporal` CLI when TEMPORAL_CLI is unset.',
  },
  {
    name: 'TIDEMARK_SLACK_DEBUG',
    source: 'slack/app.ts',
    topic: 'slack',
    readBy: ['Slack app'],
    description: "Set (to anything): Bolt's own debug log lines.",
    unset: 'errors only',
  },
  {
    name: 'TIDEMARK_SECRET_<NAME>',
    source: 'config/env.ts',
    topic: 'effects',
    readBy: ['worker', 'dev'],
    description:
      "The value of an HTTP effect's header given as `{ secret: 'NAME', prefix?: '...' }`: filled in when the effect runs, never stored with the window or shown in a log line.",
  },
  {
    name: "the variable a backup job's `encryption.env` names",
    source: 'jobs/backup/keys.ts',
    topic: 'backups',
    readBy: ['worker', 'CLI', 'dev'],
    description:
      'The keys a backup job encrypts its dumps with: `id:base64` of 32 bytes, comma-separated, the first encrypts, all decrypt. Unset while the job names it: refused.',
  },
  {
    name: 'TIDEMARK_DEMO_BACKUP_KEYS',
    source: 'jobs/catalog.ts',
    topic: 'demo',
    readBy: ['worker', 'CLI', 'dev'],
    description:
      "The demo catalog's backup job encrypts its dumps with these keys (`k1:<base64 of 32 bytes>`).",
    unset: 'the demo backups are not encrypted',
  },
  {
    name: 'OTEL_SDK_DISABLED',
    source: TRACING,
    topic: 'observability',
    description: 'true: no tracing, whatever else is set.',
  },
  {
    name: 'OTEL_TRACES_EXPORTER',
    source: TRACING,
    topic: 'observability',
    description: 'otlp, console or none: turns tracing on (every process) or off.',
    unset: 'otlp when an OTLP endpoint is set, else none',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    source: TRACING,
    topic: 'observability',
    description: 'The OTLP/HTTP collector; set, tracing is on.',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    source: TRACING,
    topic: 'observability',
    description: 'The OTLP/HTTP endpoint of traces; outranks OTEL_EXPORTER_OTLP_ENDPOINT.',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    source: TRACING,
    topic: 'observability',
    description: 'http/protobuf or http/json (gRPC is refused).',
    default: 'http/protobuf',
  },
  {
    name: 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
    source: TRACING,
    topic: 'observability',
    description: "The traces' protocol; outranks OTEL_EXPORTER_OTLP_PROTOCOL.",
  },
  {
    name: 'OTEL_EXPORTER_OTLP_*',
    source: TRACING,
    topic: 'observability',
    description: "The OTLP exporter's other settings (headers, timeout, ...), read by the OpenTelemetry SDK.",
  },
  {
    name: 'OTEL_BSP_*',
    source: TRACING,
    topic: 'observability',
    description: "The batch span processor's delays and sizes, read by the OpenTelemetry SDK.",
  },
  {
    name: 'OTEL_LOG_LEVEL',
    source: TRACING,
    topic: 'observability',
    description: "The OpenTelemetry SDK's own complaints on stderr (an export that failed).",
    default: 'WARN',
  },
  {
    name: 'OTEL_SERVICE_NAME',
    source: TRACING,
    topic: 'observability',
    description: "The spans' service.name.",
    default: 'tidemark-worker',
  },
  {
    name: 'OTEL_RESOURCE_ATTRIBUTES',
    source: TRACING,
    topic: 'observability',
    description: 'More resource attributes of the spans (key=value, comma-separated).',
  },
];
