// The Temporal dev server as a child process (embedded SQLite file, Web UI), or an existing
// server that TEMPORAL_ADDRESS or a TOML profile names (config/temporal.ts). Waits until it answers.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, type Config } from '../config/env.js';
import { describeTemporal, type TemporalSettings } from '../config/temporal.js';
import { connectTemporal } from '../workers/temporal-connection.js';
import { findTemporalCli } from './temporal-cli.js';

export interface TemporalServer {
  address: string;
  uiUrl: string | null;
  /** Present when this process started the server. */
  child: ChildProcess | null;
  stop(): Promise<void>;
}

/** True once the server answers; the last reason it did not otherwise. A wrong setting throws at once. */
async function reachable(settings: TemporalSettings, timeoutMs: number): Promise<true | string> {
  const deadline = Date.now() + timeoutMs;
  let reason = 'no answer';
  while (Date.now() < deadline) {
    try {
      const connection = await connectTemporal(settings, { connectTimeout: 1_000 });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
      return true;
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      reason = (err as Error).message;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  return reason;
}

export async function startTemporalServer(
  config: Config,
  log: (line: string) => void,
): Promise<TemporalServer> {
  const settings = config.temporal;
  if (settings.addressSet) {
    const answer = await reachable(settings, 10_000);
    if (answer !== true) {
      throw new Error(
        `${answer}. Or unset ${settings.addressFrom.startsWith('TEMPORAL_') ? settings.addressFrom : `the address (${settings.addressFrom})`} to let tidemark dev run a dev server.`,
      );
    }
    log(`Temporal ${describeTemporal(settings)}`);
    return { address: settings.address, uiUrl: null, child: null, stop: async () => undefined };
  }
  const address = settings.address;
  const uiUrl = `http://127.0.0.1:${config.TEMPORAL_UI_PORT}`;
  if ((await reachable(settings, 500)) === true) {
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
  if ((await reachable(settings, 30_000)) !== true) {
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
