// Entry point of the Slack app alone (npm run slack): for hosts that serve Slack's requests.
import { isEntryPoint } from '../config/entry.js';
import { loadConfig } from '../config/env.js';
import { describeTemporal } from '../config/temporal.js';
import { connectTemporalClient } from '../workers/temporal-connection.js';
import { directoryOf } from '../config/people.js';
import { createDb, ensureDatabase, migrateAll } from '../db/database.js';
import { loadCatalog } from '../config/catalog-source.js';
import { buildDeps } from '../workers/deps.js';
import { createLog, logOptionsFromConfig } from '../workers/log.js';
import { shutdownTracing } from '../workers/tracing.js';
import { startSlackApp } from './app.js';

/** `tidemark slack` (npm run slack): serves Slack's requests until SIGINT/SIGTERM. */
export async function runSlack(): Promise<void> {
  const config = loadConfig();
  if (!config.SLACK_SIGNING_SECRET || !config.SLACK_BOT_TOKEN)
    throw new Error('set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN to run the Slack app');
  await ensureDatabase(config.DATABASE_URL);
  const db = createDb(config.DATABASE_URL, { max: 4, schema: config.TIDEMARK_SCHEMA });
  const catalog = await loadCatalog(config);
  await migrateAll(db, catalog.migrations);
  const { connection, client: temporal } = await connectTemporalClient(config);
  const deps = buildDeps(config, {
    db,
    catalog,
    client: temporal,
    logger: createLog(logOptionsFromConfig(config)).logger,
  });
  const app = await startSlackApp({
    signingSecret: config.SLACK_SIGNING_SECRET,
    botToken: config.SLACK_BOT_TOKEN,
    apiUrl: config.SLACK_API_URL,
    temporal,
    db,
    logger: deps.logger,
    port: config.SLACK_APP_PORT,
    deps,
    directory: directoryOf(config),
    ...(config.TIDEMARK_APPROVER_GROUP ? { approverGroup: config.TIDEMARK_APPROVER_GROUP } : {}),
    ...(config.TIDEMARK_DECISION_KEY ? { decisionKey: config.TIDEMARK_DECISION_KEY } : {}),
  });
  deps.logger.info(
    `Slack app listening on :${config.SLACK_APP_PORT}/slack/events; Temporal ${describeTemporal(config.temporal)}`,
  );
  const stop = () =>
    void app
      .stop()
      .then(() => connection.close())
      .then(() => db.destroy())
      .then(() => shutdownTracing())
      .then(() => process.exit(0));
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

if (isEntryPoint(import.meta.url))
  runSlack().catch((err: unknown) => {
    console.error(`[slack] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
