// `tidemark web`: the management page alone, for hosts that serve it (tidemark dev runs it too).
import { loadCatalog } from '../config/catalog-source.js';
import { ConfigError, loadConfig, type Config } from '../config/env.js';
import { describeTemporal } from '../config/temporal.js';
import { connectTemporalClient } from '../workers/temporal-connection.js';
import { createDb, ensureDatabase, migrateAll, redactUrl } from '../db/database.js';
import { createLog, logOptionsFromConfig } from '../workers/log.js';
import { shutdownTracing } from '../workers/tracing.js';
import { startWebServer } from './server.js';

/** The page needs a way in: the identity provider, or the shared token of single-user mode. */
export function checkSignIn(config: Config): void {
  if (!config.TIDEMARK_OIDC_ISSUER && !config.TIDEMARK_WEB_TOKEN)
    throw new ConfigError(
      'TIDEMARK_OIDC_ISSUER',
      'set it (with TIDEMARK_OIDC_CLIENT_ID, TIDEMARK_WEB_URL and TIDEMARK_OIDC_ROLES) so people sign in through your identity provider, or set TIDEMARK_WEB_TOKEN (at least 12 characters) for single-user mode',
    );
}

/**
 * Serves the page until SIGINT/SIGTERM. People sign in through the identity provider
 * (TIDEMARK_OIDC_ISSUER), or, in single-user mode, with TIDEMARK_WEB_TOKEN: one of them is required.
 */
export async function runWeb(): Promise<void> {
  const config = loadConfig();
  checkSignIn(config);
  const catalog = await loadCatalog(config);
  await ensureDatabase(config.DATABASE_URL);
  const db = createDb(config.DATABASE_URL, { max: 4, schema: config.TIDEMARK_SCHEMA });
  await migrateAll(db, catalog.migrations);
  const { connection, client } = await connectTemporalClient(config);
  const web = await startWebServer({
    port: config.TIDEMARK_WEB_PORT,
    host: config.TIDEMARK_WEB_HOST,
    ...(config.TIDEMARK_WEB_TOKEN ? { token: config.TIDEMARK_WEB_TOKEN } : {}),
    db,
    client,
    catalog,
    config,
    logger: createLog(logOptionsFromConfig(config)).logger,
  });
  console.log(
    `[web] ${web.url}, ${config.TIDEMARK_OIDC_ISSUER ? `sign-in through ${config.TIDEMARK_OIDC_ISSUER}` : 'single-user mode (the shared token)'}${config.TIDEMARK_DECISION_KEY ? '' : '; decisions are not signed (TIDEMARK_DECISION_KEY unset)'} (Temporal ${describeTemporal(config.temporal)}; database ${redactUrl(config.DATABASE_URL)})`,
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
