// Configuration from the environment, parsed once per entry point into a frozen object.
// An error names the variable and says how to fix it.
import { z } from 'zod';

const schema = z.object({
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL, e.g. postgres://postgres@127.0.0.1:5432/tidemark')
    .default('postgres://postgres@127.0.0.1:5432/tidemark'),
  TEMPORAL_ADDRESS: z.string().regex(/^[^\s:]+:\d+$/, 'must be host:port, e.g. 127.0.0.1:7233').optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TIDEMARK_TASK_QUEUE: z.string().min(1).default('tidemark'),
  TEMPORAL_UI_PORT: z.coerce.number().int().min(1).max(65535).default(8233),
  TEMPORAL_PORT: z.coerce.number().int().min(1).max(65535).default(7233),
  TIDEMARK_STATE_DIR: z.string().min(1).default('.tidemark'),
  TEMPORAL_CLI: z.string().min(1).optional(),
});

export type Config = Readonly<z.infer<typeof schema>>;

export class ConfigError extends Error {
  readonly code = 'CONFIG';
  constructor(readonly variable: string, detail: string) {
    super(`environment variable ${variable}: ${detail}`);
    this.name = 'ConfigError';
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const picked = Object.fromEntries(Object.keys(schema.shape).map((k) => [k, env[k] === '' ? undefined : env[k]]));
  const parsed = schema.safeParse(picked);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(String(issue.path[0]), issue.message);
  }
  return Object.freeze(parsed.data);
}
