// Worker entry point: load config, connect to PostgreSQL and Temporal, run until SIGINT/SIGTERM.
// Start as many as you like, on as many hosts as you like, with the same settings.
import { isEntryPoint } from '../config/entry.js';
import type { NativeConnection, Worker } from '@temporalio/worker';
import type { Connection } from '@temporalio/client';
import { temporalDataConverter } from '../codec/index.js';
import { loadConfig, pollQueues, watchQueueOf } from '../config/env.js';
import { describeTemporal } from '../config/temporal.js';
import { connectTemporalClient, connectTemporalWorker } from './temporal-connection.js';
import { createDb, ensureDatabase, migrateAll, redactUrl } from '../db/database.js';
import { loadCatalog } from '../config/catalog-source.js';
import { buildDeps } from './deps.js';
import { createMetrics } from './metrics.js';
import { freeLoopbackAddress, readiness, startProbeServer, type ProbeServer } from './probes.js';
import { createLog, logOptionsFromConfig, type Log } from './log.js';
import { installRuntime } from './runtime.js';
import { ensureSearchAttributes } from './search-attributes.js';
import { createWorkers, runWorkers, workflowBundle } from './create-worker.js';
import { shutdownTracing } from './tracing.js';

let log: Log | undefined;

/** `tidemark worker` (npm run worker): runs until SIGINT/SIGTERM. */
export async function runWorker(): Promise<void> {
  // The SDK serves its metrics on loopback; the probe server's /metrics appends them.
  const sdkMetrics = await freeLoopbackAddress();
  const config = loadConfig();
  // A catalog that cannot be used is refused before anything starts.
  const catalog = await loadCatalog(config);
  // JSON lines on stdout unless TIDEMARK_LOG_FORMAT=pretty; the SDK's lines go the same way.
  log = createLog(logOptionsFromConfig(config));
  installRuntime(config.TIDEMARK_SDK_LOG_LEVEL, { logger: log.sdk, sdkMetrics });
  await ensureDatabase(config.DATABASE_URL);
  const db = createDb(config.DATABASE_URL, { schema: config.TIDEMARK_SCHEMA });
  const temporalLine = describeTemporal(config.temporal);
  let connection: NativeConnection | undefined;
  let clientConnection: Connection | undefined;
  let probes: ProbeServer | undefined;
  try {
    await migrateAll(db, catalog.migrations);
    connection = await connectTemporalWorker(config);
    const temporalClient = await connectTemporalClient(config);
    clientConnection = temporalClient.connection;
    const client = temporalClient.client;
    await ensureSearchAttributes(clientConnection, config.TEMPORAL_NAMESPACE);
    const metrics = createMetrics({
      db,
      catalog,
      client,
      taskQueues: [config.TIDEMARK_TASK_QUEUE, watchQueueOf(config)],
    });
    const deps = { ...buildDeps(config, { db, catalog, client, logger: log.logger }), metrics: metrics.sink };
    const running: { workers: readonly Worker[] } = { workers: [] };
    const temporal = clientConnection;
    probes = await startProbeServer({
      host: config.TIDEMARK_METRICS_HOST,
      port: config.TIDEMARK_METRICS_PORT,
      ...(config.TIDEMARK_METRICS_TOKEN ? { token: config.TIDEMARK_METRICS_TOKEN } : {}),
      registry: metrics.registry,
      sdkMetricsUrl: `http://${sdkMetrics}/metrics`,
      ready: () =>
        readiness({
          workers: () => running.workers,
          db,
          temporal,
          ...(deps.redact ? { redact: deps.redact } : {}),
        }),
    });
    deps.logger.info(`metrics on ${probes.url}/metrics; health on ${probes.url}/healthz and /readyz`);
    const taskQueues = pollQueues(config);
    const code = await workflowBundle();
    const workers = (running.workers = await createWorkers({
      connection,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueues,
      deps,
      bundle: code.bundle,
      dataConverter: temporalDataConverter(),
    }));
    const polled = taskQueues.map((q) => `"${q}"${q === watchQueueOf(config) ? ' (the lag watch)' : ''}`);
    deps.logger.info(
      `worker polling task queue ${polled.join(' and ')} on Temporal ${temporalLine}; database ${redactUrl(config.DATABASE_URL)}; workflow code ${code.from}; jobs: ${catalog.jobs.map((j) => j.name).join(', ')}`,
      {
        taskQueues: taskQueues.join(','),
        address: config.temporal.address,
        namespace: config.TEMPORAL_NAMESPACE,
        tls: config.temporal.tls,
      },
    );
    await runWorkers(workers);
  } finally {
    await probes?.stop();
    await connection?.close();
    await clientConnection?.close();
    await db.destroy();
    await shutdownTracing();
  }
}

if (isEntryPoint(import.meta.url))
  runWorker().catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    // A bad configuration fails before the process's logger exists: said as a JSON line all the same.
    (log ?? createLog({ format: 'json', level: 'info' })).logger.error(`worker stopped: ${message}`);
    process.exit(1);
  });
