// npm start: the whole system on one machine. Temporal dev server (or TEMPORAL_ADDRESS),
// PostgreSQL migrated, schedules synced from the catalog, demo data seeded, a worker, and a
// trickle of new orders; each job fired once right away. Ctrl-C stops everything cleanly.
import { isEntryPoint } from '../config/entry.js';
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import type { Worker } from '@temporalio/worker';
import { temporalDataConverter } from '../codec/index.js';
import { sql } from 'kysely';
import { loadConfig, pollQueues, watchQueueOf } from '../config/env.js';
import { connectTemporalClient, connectTemporalWorker } from '../workers/temporal-connection.js';
import { createDb, ensureDatabase, migrateAll, redactUrl } from '../db/database.js';
import { isDemoCatalog, loadCatalog } from '../config/catalog-source.js';
import { demo, DEMO_SCHEMA } from '../jobs/demo-schema.js';
import { parseDuration } from '../schedules/duration.js';
import type { Job } from '../schedules/job.js';
import { searchAttributes } from '../contract/search-attributes.js';
import { formatPreview, previewJob } from '../schedules/preview.js';
import { describePlan } from '../workers/schedule-sync.js';
import { scheduleIdOf } from '../contract/schedule-ids.js';
import { isoUtc } from '../contract/window-key.js';
import { buildDeps } from '../workers/deps.js';
import { createMetrics } from '../workers/metrics.js';
import { freeLoopbackAddress, readiness, startProbeServer } from '../workers/probes.js';
import { createLog, logOptionsFromConfig } from '../workers/log.js';
import { installRuntime } from '../workers/runtime.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import { syncSchedulesWithAlerts } from '../workers/sync-schedules.js';
import { createWorkers, runWorkers, workflowBundle } from '../workers/create-worker.js';
import { shutdownTracing } from '../workers/tracing.js';
import { startSlackApp } from '../slack/app.js';
import { directoryOf } from '../config/people.js';
import { startWebServer } from '../web/server.js';
import { startMailCapture } from './mail-capture.js';
import { startMarket } from './marketplace-simulator.js';
import { startTemporalServer } from './temporal-server.js';

/**
 * `tidemark dev` (npm start): the whole system on one machine, until Ctrl-C. With the demo catalog
 * it also runs the demo's extras (its marketplace simulator, new orders every 3 s, each job fired
 * once, the hourly job backfilled over 24 hours); with yours, nothing but your jobs on their
 * schedules, and a backfill of every job over the past `backfill` (e.g. "24h") only when asked.
 */
export async function runDev(opts: { backfill?: string } = {}): Promise<void> {
  const sdkMetrics = await freeLoopbackAddress();
  let config = loadConfig();
  // A catalog that cannot be used is refused before anything starts.
  const catalog = await loadCatalog(config, { demoByDefault: true });
  const isDemo = isDemoCatalog(catalog);
  // Readable lines in a terminal unless TIDEMARK_LOG_FORMAT=json; the worker's and the SDK's go the same way.
  const logs = createLog(logOptionsFromConfig(config, 'pretty'));
  const log = (line: string) => logs.logger.info(`[tidemark] ${line}`);
  installRuntime(config.TIDEMARK_SDK_LOG_LEVEL, { ownSignals: true, logger: logs.sdk, sdkMetrics });
  // Stopped in reverse order of start: the worker drains before the Temporal server and the
  // database it uses go away. Whatever started after a stop began is stopped by the same loop.
  const cleanups: (() => Promise<unknown>)[] = [() => shutdownTracing()];
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      for (let fn = cleanups.pop(); fn; fn = cleanups.pop())
        await fn().catch((err: unknown) =>
          log(`while stopping: ${err instanceof Error ? err.message : String(err)}`),
        );
    })());
  let stopping = false;
  const onSignal = () => {
    if (stopping) return;
    stopping = true;
    log('stopping: worker, order trickle, database, Temporal server ...');
    void stop().then(() => {
      log('stopped.');
      process.exit(0);
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    await ensureDatabase(config.DATABASE_URL);
    const db = createDb(config.DATABASE_URL, { schema: config.TIDEMARK_SCHEMA });
    cleanups.push(() => db.destroy());
    const applied = await migrateAll(db, catalog.migrations);
    log(
      `PostgreSQL ${redactUrl(config.DATABASE_URL)}: ${applied.length ? `applied ${applied.join(', ')}` : 'schema up to date'}`,
    );

    if (!config.SMTP_HOST) {
      // No mail server configured: capture mail locally so alerts and reports can be read.
      const capture = await startMailCapture(join(resolve(config.TIDEMARK_STATE_DIR), 'mail'));
      cleanups.push(() => capture.close());
      config = loadConfig({
        ...process.env,
        SMTP_HOST: '127.0.0.1',
        SMTP_PORT: String(capture.port),
        TIDEMARK_ALERT_EMAIL: process.env.TIDEMARK_ALERT_EMAIL || 'ops@localhost',
      });
      log(`mail capture on 127.0.0.1:${capture.port}: alerts and reports land in ${capture.dir}/*.eml`);
    }

    const shop = new URL(config.TIDEMARK_DEMO_MARKETPLACE_URL);
    if (isDemo && ['127.0.0.1', 'localhost'].includes(shop.hostname)) {
      const simulator = await startMarket(Number(shop.port)).catch((err: unknown) => {
        log(
          `the demo marketplace could not listen on ${shop.host} (${(err as Error).message}); marketplace-prices will fail and alert`,
        );
        return undefined;
      });
      if (simulator) {
        cleanups.push(() => simulator.close());
        log(
          `demo marketplace simulator on ${shop.origin}: its book is at ${shop.href.replace(/\/$/, '')}/v1/items`,
        );
      }
    }

    const server = await startTemporalServer(config, log);
    cleanups.push(() => server.stop());
    // The address is the server's: the one the settings name, or the dev server just started on the default.
    const { connection, client } = await connectTemporalClient(config);
    cleanups.push(() => connection.close());
    const added = await ensureSearchAttributes(connection, config.TEMPORAL_NAMESPACE);
    if (added.length) log(`search attributes registered: ${added.join(', ')}`);

    const now = new Date();
    for (const job of catalog.jobs) await job.seed?.(db, { now });
    if (isDemo) {
      const trickle = setInterval(() => {
        const amount = Math.round((5 + Math.random() * 95) * 100) / 100;
        void sql`insert into ${demo.orders} (order_key, placed_at, amount) values (${`live-${Date.now()}`}, now(), ${amount}) on conflict do nothing`
          .execute(db)
          .catch(() => undefined);
      }, 3_000);
      cleanups.push(async () => clearInterval(trickle));
      log('demo data seeded: orders for the past 24 hours, and a new order every 3 s');
    }

    const metrics = {
      ...createMetrics({
        db,
        catalog,
        client,
        taskQueues: [config.TIDEMARK_TASK_QUEUE, watchQueueOf(config)],
      }),
      sdkMetricsUrl: `http://${sdkMetrics}/metrics`,
    };
    const deps = {
      ...buildDeps(config, { db, catalog, client, logger: logs.logger }),
      metrics: metrics.sink,
    };
    const live: { workers: readonly Worker[] } = { workers: [] };
    const probes = await startProbeServer({
      host: config.TIDEMARK_METRICS_HOST,
      port: config.TIDEMARK_METRICS_PORT,
      ...(config.TIDEMARK_METRICS_TOKEN ? { token: config.TIDEMARK_METRICS_TOKEN } : {}),
      registry: metrics.registry,
      sdkMetricsUrl: metrics.sdkMetricsUrl,
      ready: () =>
        readiness({
          workers: () => live.workers,
          db,
          temporal: connection,
          ...(deps.redact ? { redact: deps.redact } : {}),
        }),
    });
    cleanups.push(() => probes.stop());
    const plan = await syncSchedulesWithAlerts(deps, client, catalog, {
      taskQueue: config.TIDEMARK_TASK_QUEUE,
      watchTaskQueue: watchQueueOf(config),
      apply: true,
    });
    log(`schedules synced:\n${describePlan(plan)}`);

    const workerConnection = await connectTemporalWorker(config);
    const workers = await createWorkers({
      connection: workerConnection,
      namespace: config.TEMPORAL_NAMESPACE,
      taskQueues: pollQueues(config),
      deps,
      bundle: (await workflowBundle()).bundle,
      dataConverter: temporalDataConverter(),
    });
    live.workers = workers;
    const running = runWorkers(workers);
    cleanups.push(async () => {
      for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await running.catch(() => undefined);
      await workerConnection.close();
    });

    if (config.SLACK_SIGNING_SECRET && config.SLACK_BOT_TOKEN) {
      const slack = await startSlackApp({
        signingSecret: config.SLACK_SIGNING_SECRET,
        botToken: config.SLACK_BOT_TOKEN,
        apiUrl: config.SLACK_API_URL,
        temporal: client,
        db,
        logger: deps.logger,
        port: config.SLACK_APP_PORT,
        deps,
        directory: directoryOf(config),
        ...(config.TIDEMARK_APPROVER_GROUP ? { approverGroup: config.TIDEMARK_APPROVER_GROUP } : {}),
        ...(config.TIDEMARK_DECISION_KEY ? { decisionKey: config.TIDEMARK_DECISION_KEY } : {}),
      });
      cleanups.push(() => slack.stop());
      log(
        `Slack app on :${config.SLACK_APP_PORT}/slack/events (approvers: ${directoryOf(config).approvers.join(', ') || 'none configured'})`,
      );
    }

    const webToken = config.TIDEMARK_WEB_TOKEN ?? randomBytes(12).toString('hex');
    const web = await startWebServer({
      port: config.TIDEMARK_WEB_PORT,
      token: webToken,
      db,
      client,
      catalog,
      config,
      metrics,
      logger: logs.logger,
    });
    cleanups.push(() => web.stop());

    const backfill = (job: Job, from: Date, to: Date) =>
      client.workflow.start('backfill', {
        taskQueue: config.TIDEMARK_TASK_QUEUE,
        workflowId: `${job.name}/backfill-${isoUtc(from)}`,
        args: [{ job: job.name, from: isoUtc(from), to: isoUtc(to), concurrency: 4 }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: searchAttributes('backfill', job.name),
        staticSummary: `backfill of ${job.name} from ${isoUtc(from)}`,
      });
    if (isDemo) {
      for (const job of catalog.jobs) await client.schedule.getHandle(scheduleIdOf(job.name)).trigger();
      const hourly = catalog.jobs.find((j) => j.grid.kind === 'fixed' && j.grid.ms === 3_600_000);
      if (hourly) {
        const to = new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000);
        await backfill(hourly, new Date(to.getTime() - 24 * 3_600_000), to);
        log(`backfill of ${hourly.name} over the past 24 hours started`);
      }
    } else if (opts.backfill) {
      // Asked for: every job's closed windows over the past span (done ones are skipped, not run again).
      const from = new Date(now.getTime() - parseDuration(opts.backfill)!);
      for (const job of catalog.jobs) await backfill(job, from, now);
      log(
        `backfill of ${catalog.jobs.map((j) => j.name).join(', ')} over the past ${opts.backfill} started (its closed windows; done ones are skipped)`,
      );
    } else {
      log(
        'your jobs run on their schedules. To run past windows now: tidemark dev --backfill 24h, or tidemark backfill <job> --from <date>',
      );
    }

    console.log(
      [
        '',
        '  tidemark is running',
        `  Temporal      ${server.address}${server.uiUrl ? `   Web UI: ${server.uiUrl}/namespaces/${config.TEMPORAL_NAMESPACE}/workflows` : ''}`,
        `  PostgreSQL    ${redactUrl(config.DATABASE_URL)}   (tidemark's tables in schema ${config.TIDEMARK_SCHEMA}${isDemo ? `, the demo's in ${DEMO_SCHEMA}` : ''})`,
        `  Task queues   ${config.TIDEMARK_TASK_QUEUE}, ${watchQueueOf(config)} (the lag watch)   (more workers: npx tidemark worker, on any host)`,
        `  Management    ${web.url}   token: ${config.TIDEMARK_WEB_TOKEN ? '(TIDEMARK_WEB_TOKEN)' : webToken}`,
        `  Metrics       ${probes.url}/metrics   health: ${probes.url}/healthz, ${probes.url}/readyz`,
        '  Jobs:',
        ...catalog.jobs.map((j) =>
          formatPreview(previewJob(j, new Date(), 2))
            .split('\n')
            .map((l) => `    ${l}`)
            .join('\n'),
        ),
        '',
        '  Log lines: PROCESSED / SKIPPED reason=running / SKIPPED reason=already-done.  Ctrl-C stops everything.',
        '',
      ].join('\n'),
    );
    await running;
    // After Ctrl-C the worker ends first; the rest stops before this returns (tidemark dev exits then).
    await stopped;
  } catch (err) {
    // A step cut short by Ctrl-C (its connection closed under it) is the stop, not a failure.
    if (stopping) return;
    await stop();
    throw err;
  }
}

if (isEntryPoint(import.meta.url))
  runDev().catch((err: unknown) => {
    console.error(`[tidemark] ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
