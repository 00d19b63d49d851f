// `tidemark web`: the management page alone, for hosts that serve it (tidemark dev runs it too).
import { loadCatalog } from '../config/catalog-source.js';
import { ConfigError, loadConfig } from '../config/env.js';
import { describeTemporal } from '../config/temporal.js';
import { connectTemporalClient } from '../workers/temporal-connection.js';
import { createDb, ensureDatabase, migrateAll, redactUrl } from '../db/database.js';
import { createLog, logOptionsFromConfig } from '../workers/log.js';
import { shutdownTracing } from '../workers/tracing.js';
import { startWebServer } from './server.js';

/** Serves the page until SIGINT/SIGTERM. TIDEMARK_WEB_TOKEN is required: it is the login. */
export async function runWeb(): Promise<void> {
  const config = loadConfig();
  if (!config.TIDEMARK_WEB_TOKEN)
    throw new ConfigError(
      'TIDEMARK_WEB_TOKEN',
      'set it (at least 12 characters) to run the page: it is the login',
    );
  const catalog = await loadCatalog(config);
  await ensureDatabase(config.DATABASE_URL);
  const db = createDb(config.DATABASE_URL, { max: 4, schema: config.TIDEMARK_SCHEMA });
  await migrateAll(db, catalog.migrations);
  const { connection, client } = await connectTemporalClient(config);
  const web = await startWebServer({
    port: config.TIDEMARK_WEB_PORT,
    host: config.TIDEMARK_WEB_HOST,
    token: config.TIDEMARK_WEB_TOKEN,
    db,
    client,
    catalog,
    config,
    logger: createLog(logOptionsFromConfig(config)).logger,
  });
  console.log(
    `[web] ${web.url} (Temporal ${describeTemporal(config.temporal)}; database ${redactUrl(config.DATABASE_URL)})`,
  );
  await new Promise<void>((done) => {
    const stop = () => done();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await web.stop();
  await connection.close();
  await db.destroy();
  await shutdownTracing();
}
