// One worker process of the fault suite, on one simulated host. Configured by CHAOS_WORKER (JSON),
// DATABASE_URL and TEMPORAL_ADDRESS. Its crash-point seam dies (SIGKILL) where the driver armed a
// crash: a file `<controlDir>/armed/<id>.json` naming a point and, optionally, a job. The first
// worker to reach that point claims the file by renaming it (atomic: one claim per arming),
// says so on stdout, and kills itself. Everything else is the production worker.
import { readdirSync, readFileSync, renameSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { temporalDataConverter } from '../codec/index.js';
import { resolveTemporal } from '../config/temporal.js';
import { connectTemporalWorker } from '../workers/temporal-connection.js';
import type { CrashPoint } from '../activities/crash-points.js';
import { consoleLogger } from '../activities/logger.js';
import { emailProvider } from '../activities/notify/email.js';
import { telegramProvider } from '../activities/notify/telegram.js';
import { createDb } from '../db/database.js';
import { createWorker } from '../workers/create-worker.js';
import { chaosCatalog } from './catalog.js';

export interface ChaosWorkerConfig {
  host: string;
  lanes: number;
  liveStart: string;
  taskQueue: string;
  smtp: { host: string; port: number };
  telegramUrl: string;
  controlDir: string;
  bundlePath: string;
  /** Clock skew applied through the `now` dependency (when libfaketime is not available). */
  nowOffsetMs: number;
  /** False: this worker never dies at an armed crash point (a soak run's steady host). */
  crashable: boolean;
}

export interface Arming {
  point: CrashPoint;
  /** Only keys of this job (window and effect keys start `<job>/`, backfill pages `<job>@`). */
  job?: string;
}

const config = JSON.parse(process.env.CHAOS_WORKER ?? '{}') as ChaosWorkerConfig;
const armedDir = join(config.controlDir, 'armed');
const claimedDir = join(config.controlDir, 'claimed');

const matches = (a: Arming, point: CrashPoint, key: string): boolean =>
  a.point === point && (!a.job || key.startsWith(`${a.job}/`) || key.startsWith(`${a.job}@`));

async function crashPoint(point: CrashPoint, key: string): Promise<void> {
  if (!config.crashable) return;
  for (const file of readdirSync(armedDir)) {
    let arming: Arming;
    try {
      arming = JSON.parse(readFileSync(join(armedDir, file), 'utf8')) as Arming;
    } catch {
      continue; // claimed or disarmed meanwhile
    }
    if (!matches(arming, point, key)) continue;
    try {
      renameSync(join(armedDir, file), join(claimedDir, `${file}.${config.host}.${process.pid}`));
    } catch {
      continue; // another worker claimed it first
    }
    process.stdout.write(`CRASH point=${point} key=${key} arming=${file}\n`, () =>
      process.kill(process.pid, 'SIGKILL'),
    );
    // Nothing after this point may run: wait for the signal.
    return new Promise<void>(() => undefined);
  }
}

const db = createDb(process.env.DATABASE_URL!);
// The suite's own dev server, whatever the shell's Temporal settings or profile say.
const temporal = resolveTemporal({ TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS });
const connection = await connectTemporalWorker({ temporal });
const worker = await createWorker({
  connection,
  namespace: temporal.namespace,
  dataConverter: temporalDataConverter(),
  taskQueue: config.taskQueue,
  bundle: { code: await readFile(config.bundlePath, 'utf8') },
  deps: {
    db,
    catalog: chaosCatalog({
      lanes: config.lanes,
      liveStart: new Date(config.liveStart),
      // Its backups' connections carry its host's application name, as its ledger's do.
      backups: { cluster: process.env.DATABASE_URL!, runDir: config.controlDir },
    }),
    logger: consoleLogger(`[${config.host}] `),
    now: config.nowOffsetMs ? () => new Date(Date.now() + config.nowOffsetMs) : () => new Date(),
    channels: {
      email: emailProvider({
        host: config.smtp.host,
        port: config.smtp.port,
        secure: false,
        rejectUnauthorized: false,
        from: 'tidemark@chaos.test',
        socketTimeoutMs: 5_000,
      }),
      telegram: telegramProvider({ token: 'chaos-token', apiUrl: config.telegramUrl }),
    },
    hooks: { crashPoint },
  },
  shutdownGraceTime: '1s',
});
process.on('SIGTERM', () => worker.shutdown());
console.log(`READY host=${config.host} pid=${process.pid} clock=${new Date().toISOString()}`);
await worker.run();
await connection.close();
await db.destroy();
