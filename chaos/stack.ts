// The fault suite's system: simulated hosts, a private PostgreSQL, its own Temporal dev server
// on a persistence file, recording sinks (SMTP, Telegram) and a supervised worker per host.
// Everything listens on the hosts' server address (a bridge, or loopback in the fallback).
import { demoMigrations } from '../jobs/demo-migrations/index.js';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import { resolveTemporal } from '../config/temporal.js';
import { connectTemporalClient } from '../workers/temporal-connection.js';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { createDb, ensureDatabase, migrateAll } from '../db/database.js';
import type { Database } from '../db/schema.js';
import { startChat, type TestChat } from '../test/helpers/chat.js';
import { startSmtp, type TestSmtp } from '../test/helpers/smtp.js';
import { bundleWorkflows } from '../workers/create-worker.js';
import { forward } from './forward.js';
import { createHosts, type Hosts } from './hosts.js';
import { BACKUP_ROWS, BACKUP_SOURCE, BACKUP_TABLE, backupDir } from './catalog.js';
import { startPgCluster, type PgCluster } from './pg-cluster.js';
import { HostWorkers } from './supervisor.js';
import { startTemporalProcess, type TemporalProcess } from './temporal-process.js';

export const TASK_QUEUE = 'chaos';

/** Debian's libfaketime (package libfaketime), under the machine's multiarch directory. */
function findLibfaketime(): string | undefined {
  try {
    for (const dir of readdirSync('/usr/lib')) {
      const path = join('/usr/lib', dir, 'faketime', 'libfaketime.so.1');
      if (existsSync(path)) return path;
    }
  } catch {
    // no /usr/lib: not Debian
  }
  return undefined;
}

/** The backup jobs' source: one table of BACKUP_ROWS rows, never written again during the run. */
async function createBackupSource(url: string): Promise<void> {
  await ensureDatabase(url);
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(`create table ${BACKUP_TABLE} (id int primary key, label text not null)`);
    await c.query(`insert into ${BACKUP_TABLE} select n, 'item ' || n from generate_series(1, $1::int) n`, [
      BACKUP_ROWS,
    ]);
  } finally {
    await c.end();
  }
}

export interface Stack {
  hosts: Hosts;
  pg: PgCluster;
  temporal: TemporalProcess;
  client: Client;
  db: Kysely<Database>;
  smtp: TestSmtp;
  chat: TestChat;
  workers: HostWorkers;
  /** How a host's clock is shifted: a process-level clock (libfaketime) or the `now` dependency. */
  clockMechanism: 'libfaketime' | 'now-dependency';
  dir: string;
  teardown(): Promise<void>;
}

export async function startStack(opts: {
  lanes: number;
  liveStart: Date;
  hostCount: number;
  net?: { prefix: string; subnet: string };
  /** A host whose worker is never killed at a crash point nor restarted for a clock skew. */
  steadyHost?: string;
  log: (line: string) => void;
}): Promise<Stack> {
  const dir = await mkdtemp(join(tmpdir(), 'tidemark-chaos-'));
  const cleanups: (() => Promise<unknown>)[] = [() => rm(dir, { recursive: true, force: true })];
  let tornDown: Promise<void> | undefined;
  const teardown = (): Promise<void> =>
    (tornDown ??= (async () => {
      if (!interruptedBy) process.off('SIGINT', interrupted).off('SIGTERM', interrupted);
      // Each step bounded: one that hangs must not leave the namespaces and servers behind.
      for (const c of cleanups.reverse())
        await Promise.race([c().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000).unref())]);
    })());
  // Interrupted (Ctrl-C): the namespaces, servers and workers go too, not only this process.
  // A terminal's Ctrl-C reaches this process twice (from the terminal and relayed by tsx): the
  // handler stays, so the second one does not end the process half torn down.
  let interruptedBy: NodeJS.Signals | undefined;
  const interrupted = (signal: NodeJS.Signals) => {
    if (interruptedBy) return;
    interruptedBy = signal;
    opts.log(`${signal}: tearing down`);
    // The rounds still running fail as their servers go: nothing of theirs matters any more.
    process.on('uncaughtException', () => undefined).on('unhandledRejection', () => undefined);
    void teardown().then(() => process.exit(130));
  };
  process.on('SIGINT', interrupted).on('SIGTERM', interrupted);
  try {
    const hosts = await createHosts({ count: opts.hostCount, ...opts.net });
    cleanups.push(() => hosts.destroy());
    opts.log(`hosts: ${hosts.note}`);
    const listen = [...new Set([hosts.serverAddress, '127.0.0.1'])];
    const [pg, temporal, smtp, chat, bundle] = await Promise.all([
      startPgCluster({ listen }),
      startTemporalProcess({ ip: '127.0.0.1' }),
      startSmtp({ host: hosts.serverAddress }),
      startChat({ host: hosts.serverAddress }),
      bundleWorkflows(),
    ]);
    cleanups.push(
      () => pg.destroy(),
      () => temporal.destroy(),
      () => smtp.close(),
      () => chat.close(),
    );
    // Hosts reach Temporal on the bridge through a forwarder (its services dial 127.0.0.1).
    const temporalPort = Number(temporal.address.split(':').at(-1));
    const temporalForHosts = `${hosts.serverAddress}:${temporalPort}`;
    if (hosts.serverAddress !== '127.0.0.1') {
      const forwarder = await forward(hosts.serverAddress, temporalPort);
      cleanups.push(() => forwarder.close());
    }
    opts.log(`PostgreSQL ${pg.url()} (private cluster), Temporal ${temporal.address} (${temporal.dbFile})`);
    const url = pg.url('tidemark');
    await ensureDatabase(url);
    const db = createDb(url, { max: 10 });
    cleanups.push(() => db.destroy());
    await migrateAll(db, demoMigrations);
    await createBackupSource(pg.url(BACKUP_SOURCE));
    await mkdir(backupDir(dir));
    const bundlePath = join(dir, 'workflows.js');
    await writeFile(bundlePath, bundle.code);
    await mkdir(join(dir, 'armed'));
    await mkdir(join(dir, 'claimed'));
    // The suite's own dev server, whatever the shell's Temporal settings or profile say.
    const { connection, client } = await connectTemporalClient({
      temporal: resolveTemporal({ TEMPORAL_ADDRESS: temporal.address }),
    });
    cleanups.push(() => connection.close());
    const libfaketime = findLibfaketime();
    const clockMechanism = libfaketime ? 'libfaketime' : 'now-dependency';
    const workers = new HostWorkers({
      hosts,
      script: new URL('./worker.ts', import.meta.url),
      config: {
        lanes: opts.lanes,
        liveStart: opts.liveStart.toISOString(),
        taskQueue: TASK_QUEUE,
        smtp: { host: hosts.serverAddress, port: smtp.port },
        telegramUrl: chat.telegramUrl,
        controlDir: dir,
        bundlePath,
      },
      databaseUrl: (host) => `${url}?application_name=tidemark-chaos-${host}`,
      temporalAddress: temporalForHosts,
      ...(opts.steadyHost ? { steadyHost: opts.steadyHost } : {}),
      clock: (offsetMs): { env: Record<string, string>; nowOffsetMs: number } =>
        libfaketime
          ? {
              env: offsetMs
                ? {
                    LD_PRELOAD: libfaketime,
                    FAKETIME: `${offsetMs > 0 ? '+' : '-'}${Math.abs(offsetMs) / 1000}s`,
                    FAKETIME_DONT_FAKE_MONOTONIC: '1',
                  }
                : {},
              nowOffsetMs: 0,
            }
          : { env: {}, nowOffsetMs: offsetMs },
      log: opts.log,
    });
    cleanups.push(() => workers.stopAll());
    await workers.startAll();
    return { hosts, pg, temporal, client, db, smtp, chat, workers, clockMechanism, dir, teardown };
  } catch (err) {
    await teardown();
    throw err;
  }
}
