// The Temporal dev server as a child process (embedded SQLite file, Web UI), or an existing
// server at TEMPORAL_ADDRESS. Waits until it answers before returning.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Connection } from '@temporalio/client';
import type { Config } from '../config/env.js';
import { findTemporalCli } from '../scripts/temporal-cli.js';

export interface TemporalServer {
  address: string;
  uiUrl: string | null;
  /** Present when this process started the server. */
  child: ChildProcess | null;
  stop(): Promise<void>;
}

async function reachable(address: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
      return true;
    } catch {
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return false;
}

export async function startTemporalServer(
  config: Config,
  log: (line: string) => void,
): Promise<TemporalServer> {
  if (config.TEMPORAL_ADDRESS) {
    if (!(await reachable(config.TEMPORAL_ADDRESS, 10_000))) {
      throw new Error(
        `TEMPORAL_ADDRESS=${config.TEMPORAL_ADDRESS} does not answer. Start that server, or unset TEMPORAL_ADDRESS to let npm start run a dev server.`,
      );
    }
    return { address: config.TEMPORAL_ADDRESS, uiUrl: null, child: null, stop: async () => undefined };
  }
  const address = `127.0.0.1:${config.TEMPORAL_PORT}`;
  const uiUrl = `http://127.0.0.1:${config.TEMPORAL_UI_PORT}`;
  if (await reachable(address, 500)) {
    log(`A Temporal server already answers on ${address}; using it.`);
    return { address, uiUrl, child: null, stop: async () => undefined };
  }
  const cli = findTemporalCli({ install: true });
  const stateDir = resolve(config.TIDEMARK_STATE_DIR);
  mkdirSync(stateDir, { recursive: true });
  const dbFile = join(stateDir, 'temporal.db');
  const child = spawn(
    cli,
    [
      'server',
      'start-dev',
      '--ip',
      '127.0.0.1',
      '--port',
      String(config.TEMPORAL_PORT),
      '--ui-port',
      String(config.TEMPORAL_UI_PORT),
      '--db-filename',
      dbFile,
      '--namespace',
      config.TEMPORAL_NAMESPACE,
      '--log-level',
      'warn',
    ],
    // Its own process group: a terminal's Ctrl-C reaches npm start, which stops the server after
    // the workers that use it have drained, not before.
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // In its own process group no Ctrl-C reaches it: it must not outlive this process either.
  const orphaned = () => {
    if (child.exitCode === null) child.kill('SIGTERM');
  };
  process.once('exit', orphaned);
  void exited.then(() => process.off('exit', orphaned));
  if (!(await reachable(address, 30_000))) {
    child.kill('SIGKILL');
    throw new Error(
      `The Temporal dev server (${cli}) did not answer on ${address} within 30 s. Is the port taken? Its output:\n${stderr}`,
    );
  }
  log(`Temporal dev server on ${address} (state in ${dbFile}), Web UI ${uiUrl}`);
  return {
    address,
    uiUrl,
    child,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
