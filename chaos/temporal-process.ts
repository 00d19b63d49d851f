// The Temporal CLI dev server as a child process the chaos harness can SIGKILL and start again
// on the same SQLite persistence file and port, so workflows, schedules and search attributes
// survive the "crash". No Web UI.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { findTemporalCli } from '../bin/temporal-cli.js';
import { freePort } from '../test/helpers/net.js';
import { ensureSearchAttributes } from '../workers/search-attributes.js';
import { alive, mark, ownedTempDir, sweepLeftovers } from './leftovers.js';

export interface TemporalProcess {
  readonly address: string; // `${ip}:${port}`
  readonly dbFile: string;
  /** SIGKILL, waits for the process to exit. */
  kill(): Promise<void>;
  /** Starts again on the same persistence file and port; waits until it answers. */
  start(): Promise<void>;
  /** SIGKILL if running and removes its files. Idempotent. */
  destroy(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;
const NAMESPACE = 'default';
const DIR_PREFIX = 'tidemark-chaos-temporal-';

/** A process's command line ('' when it is gone or unreadable). */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
}

export async function startTemporalProcess(opts: { ip: string; port?: number }): Promise<TemporalProcess> {
  const cli = findTemporalCli({ install: true });
  await sweepLeftovers(DIR_PREFIX, async (dir, data) => {
    const server = data.server;
    if (typeof server === 'number' && alive(server) && commandLine(server).includes(dir))
      process.kill(server, 'SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  const dir = ownedTempDir(DIR_PREFIX);
  const dbFile = join(dir, 'temporal.db');
  let port = opts.port ?? (await freePort());
  let address = `${opts.ip}:${port}`;
  let child: { process: ChildProcess; exited: Promise<void>; output: () => string } | undefined;

  const launch = () => {
    const proc = spawn(
      cli,
      [
        'server',
        'start-dev',
        '--headless',
        '--ip',
        opts.ip,
        '--port',
        String(port),
        '--db-filename',
        dbFile,
        '--log-level',
        'warn',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    proc.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    const exited = new Promise<void>((r) => proc.once('exit', () => r()));
    if (proc.pid !== undefined) mark(dir, { server: proc.pid });
    child = { process: proc, exited, output: () => stderr };
    return child;
  };

  const kill = async (): Promise<void> => {
    const running = child;
    child = undefined;
    if (!running) return;
    if (running.process.exitCode === null && running.process.signalCode === null)
      running.process.kill('SIGKILL');
    await running.exited;
  };

  /** Starts the process and waits until the frontend answers; the process is killed if it does not. */
  const start = async (): Promise<void> => {
    if (child)
      throw new Error(`The Temporal dev server on ${address} is running already: kill() it before start().`);
    const started = launch();
    let exitCode: number | null | undefined;
    void started.exited.then(() => (exitCode = started.process.exitCode));
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      try {
        const connection = await Connection.connect({ address, connectTimeout: 1_000 });
        try {
          await connection.workflowService.getSystemInfo({});
          // A frontend may answer before the namespace is usable after a restart: wait for that too.
          await connection.workflowService.describeNamespace({ namespace: NAMESPACE });
        } finally {
          await connection.close();
        }
        return;
      } catch (err) {
        const exited = exitCode !== undefined;
        if (exited || Date.now() > deadline) {
          await kill();
          throw new Error(
            `The Temporal dev server (${cli}) on ${address} ${exited ? `exited with ${exitCode}` : `did not answer within ${READY_TIMEOUT_MS} ms (${(err as Error).message})`}. Is the port taken? Its output:\n${started.output()}`,
          );
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  };

  let destroyed: Promise<void> | undefined;
  const destroy = (): Promise<void> =>
    (destroyed ??= (async () => {
      await kill();
      await rm(dir, { recursive: true, force: true });
    })());

  try {
    // A free port may be taken between choosing it and binding it: then choose another.
    for (let attempt = 1; ; attempt++) {
      try {
        await start();
        break;
      } catch (err) {
        if (opts.port !== undefined || attempt >= 3) throw err;
        port = await freePort();
        address = `${opts.ip}:${port}`;
      }
    }
    const connection = await Connection.connect({ address });
    try {
      await ensureSearchAttributes(connection, NAMESPACE);
    } finally {
      await connection.close();
    }
  } catch (err) {
    await destroy();
    throw err;
  }

  return {
    address,
    dbFile,
    kill,
    start,
    destroy,
  };
}
