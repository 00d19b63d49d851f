// Worker entry point: load config, connect to PostgreSQL and Temporal, run until SIGINT/SIGTERM.
// Start as many as you like, on as many hosts as you like, with the same settings.
import { NativeConnection } from '@temporalio/worker';
import { consoleLogger } from '../activities/logger.js';
import { loadConfig } from '../config/env.js';
import { createDb, ensureDatabase, migrate, redactUrl } from '../db/database.js';
import { buildCatalog } from '../jobs/catalog.js';
import { installRuntime } from './runtime.js';
import { bundleWorkflows, createWorker } from './create-worker.js';

async function main(): Promise<void> {
  installRuntime(process.env.TIDEMARK_SDK_LOG_LEVEL === 'INFO' ? 'INFO' : 'WARN');
  const config = loadConfig();
  const catalog = buildCatalog();
  await ensureDatabase(config.DATABASE_URL);
  const db = createDb(config.DATABASE_URL);
  const address = config.TEMPORAL_ADDRESS ?? `127.0.0.1:${config.TEMPORAL_PORT}`;
  let connection: NativeConnection | undefined;
  try {
    await migrate(db);
    connection = await NativeConnection.connect({ address });
    const logger = consoleLogger();
    const worker = await createWorker({
      connection, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TIDEMARK_TASK_QUEUE,
      deps: { db, catalog, logger, now: () => new Date() }, bundle: await bundleWorkflows(),
    });
    logger.info(`worker polling task queue "${config.TIDEMARK_TASK_QUEUE}" on ${address} (namespace ${config.TEMPORAL_NAMESPACE}); database ${redactUrl(config.DATABASE_URL)}; jobs: ${catalog.jobs.map((j) => j.name).join(', ')}`);
    await worker.run();
  } finally {
    await connection?.close();
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
