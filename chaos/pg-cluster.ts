// A private PostgreSQL cluster for the chaos harness: initdb in a temp dir, its own port, trust
// auth for the listen addresses' networks. It can be crashed and restarted, have backends killed,
// and be destroyed. The machine's shared cluster (5432) is never touched.
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../test/helpers/net.js';
import { ownedTempDir, sweepLeftovers } from './leftovers.js';

export interface PgCluster {
  readonly port: number;
  readonly dataDir: string;
  /** postgres://postgres@<first listen address>:<port>/<database ?? 'postgres'> */
  url(database?: string): string;
  /** Restarts the server ('immediate' = like a crash; 'fast' = clean) and waits until it accepts connections. */
  restart(mode: 'fast' | 'immediate'): Promise<void>;
  /** pg_terminate_backend of client backends whose application_name starts with the prefix;
   *  only those inside a transaction (xact_start not null) when inTransaction. Returns how many. */
  terminateBackends(opts: { applicationNamePrefix: string; inTransaction?: boolean }): Promise<number>;
  /** Stops the server (immediate) and removes its directory. Idempotent. */
  destroy(): Promise<void>;
}

const ADMIN_APPLICATION_NAME = 'tidemark-chaos-pg-admin';
const READY_TIMEOUT_MS = 60_000;
const DIR_PREFIX = 'tidemark-chaos-pg-';

/** The newest installed PostgreSQL's bin directory (/usr/lib/postgresql/<version>/bin). */
function findPgBin(): string {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+$/.test(v) && existsSync(join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  if (versions.length === 0)
    throw new Error(
      `No PostgreSQL server binaries under ${root}/<version>/bin (initdb, pg_ctl). Install them, e.g. apt-get install postgresql.`,
    );
  return join(root, versions[0]!, 'bin');
}

/** The uid and gid of the `postgres` OS user, which initdb and pg_ctl run as when we are root. */
function postgresUser(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined)
    throw new Error(
      'Running as root, but there is no `postgres` OS user to run initdb/pg_ctl as (initdb refuses root). Create it (useradd postgres) or run as a non-root user.',
    );
  return { uid: Number(uid), gid: Number(gid) };
}

/** pg_hba lines: trust over the unix socket and from each listen address's network. */
function hbaLines(listen: string[]): string[] {
  const lines = ['local all all trust'];
  for (const address of listen) {
    const family = isIP(address);
    if (family === 0)
      throw new Error(
        `startPgCluster: listen address "${address}" is not an IP address; pass IPs such as 127.0.0.1.`,
      );
    if (family === 6) lines.push(`host all all ${address}/${address === '::1' ? 128 : 64} trust`);
    else if (address.startsWith('127.')) lines.push('host all all 127.0.0.0/8 trust');
    else lines.push(`host all all ${address.split('.').slice(0, 3).join('.')}.0/24 trust`);
  }
  return [...new Set(lines)];
}

/** Runs a PostgreSQL program (as the postgres user when we are root); rejects with its output and the server log. */
function pgRunner(
  bin: string,
  owner: { uid: number; gid: number } | undefined,
  cwd: string,
  logFile: string,
): (program: string, args: string[]) => Promise<string> {
  return (program, args) => {
    const [command, argv] = owner
      ? ['runuser', ['-u', 'postgres', '--', join(bin, program), ...args]]
      : [join(bin, program), args];
    return new Promise((resolve, reject) =>
      execFile(command, argv, { cwd }, (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        let log = '';
        try {
          log = readFileSync(logFile, 'utf8').slice(-3000);
        } catch {
          // No log yet: the program failed before the server wrote one.
        }
        reject(
          new Error(
            `${program} ${args.join(' ')} failed: ${err.message}\n${stdout}${stderr}\nServer log:\n${log}`,
          ),
        );
      }),
    );
  };
}

function quoteConf(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}

export interface PgClusterOptions {
  listen: string[];
  port?: number;
  /** TLS: PEM texts written into the data directory (owner-only), and `ssl = on`. */
  ssl?: { cert: string; key: string; ca?: string };
  /** pg_hba.conf lines instead of trust from the listen networks. A `local all all trust` line is
   *  added first: the cluster's own readiness and admin connections go over the unix socket then. */
  hba?: string[];
}

export async function startPgCluster(opts: PgClusterOptions): Promise<PgCluster> {
  if (opts.listen.length === 0) throw new Error('startPgCluster: give at least one listen address.');
  const bin = findPgBin();
  const owner = process.getuid?.() === 0 ? postgresUser() : undefined;
  await sweepLeftovers(DIR_PREFIX, async (dir) => {
    const data = join(dir, 'data');
    const run = pgRunner(bin, owner, dir, join(dir, 'server.log'));
    // A stale pid file (server gone) makes pg_ctl fail; a server left running exits once its dir is gone.
    if (existsSync(join(data, 'postmaster.pid')))
      await run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });
  const base = ownedTempDir(DIR_PREFIX);
  const dataDir = join(base, 'data');
  const logFile = join(base, 'server.log');
  if (owner) chownSync(base, owner.uid, owner.gid);
  chmodSync(base, 0o700);

  const run = pgRunner(bin, owner, base, logFile);

  let destroyed: Promise<void> | undefined;
  const destroy = (): Promise<void> =>
    (destroyed ??= (async () => {
      // No pid file: never started, or stopped already. A stale one (server gone) makes pg_ctl fail: fine.
      if (existsSync(join(dataDir, 'postmaster.pid')))
        await run('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      await rm(base, { recursive: true, force: true });
    })());

  try {
    await run('initdb', [
      '-D',
      dataDir,
      '-U',
      'postgres',
      '--auth=trust',
      '--no-sync',
      '-E',
      'UTF8',
      '--locale=C',
    ]);
    writeFileSync(
      join(dataDir, 'pg_hba.conf'),
      (opts.hba ? ['local all all trust', ...opts.hba] : hbaLines(opts.listen)).join('\n') + '\n',
    );
    const sslConf: string[] = [];
    if (opts.ssl) {
      const files = { 'server.crt': opts.ssl.cert, 'server.key': opts.ssl.key, 'root.crt': opts.ssl.ca };
      for (const [name, text] of Object.entries(files)) {
        if (text === undefined) continue;
        writeFileSync(join(dataDir, name), text, { mode: 0o600 });
        if (owner) chownSync(join(dataDir, name), owner.uid, owner.gid);
      }
      sslConf.push(
        'ssl = on',
        `ssl_cert_file = ${quoteConf(join(dataDir, 'server.crt'))}`,
        `ssl_key_file = ${quoteConf(join(dataDir, 'server.key'))}`,
        ...(opts.ssl.ca ? [`ssl_ca_file = ${quoteConf(join(dataDir, 'root.crt'))}`] : []),
      );
    }
    let port = opts.port ?? (await freePort());
    const writeConf = () =>
      writeFileSync(
        join(dataDir, 'postgresql.auto.conf'),
        [
          `listen_addresses = ${quoteConf(opts.listen.join(','))}`,
          `port = ${port}`,
          `unix_socket_directories = ${quoteConf(dataDir)}`,
          'max_connections = 200',
          'shared_buffers = 32MB',
          // Speed: only an OS crash loses data without fsync, and the harness crashes processes only.
          // (synchronous_commit stays on: a commit that returned must survive restart('immediate').)
          'fsync = off',
          ...sslConf,
        ].join('\n') + '\n',
      );
    // A free port may be taken between choosing it and binding it: then choose another.
    for (let attempt = 1; ; attempt++) {
      writeConf();
      try {
        await run('pg_ctl', [
          '-D',
          dataDir,
          '-l',
          logFile,
          '-w',
          '-t',
          String(READY_TIMEOUT_MS / 1000),
          'start',
        ]);
        break;
      } catch (err) {
        if (opts.port !== undefined || attempt >= 3 || !/already in use/.test((err as Error).message))
          throw err;
        port = await freePort();
      }
    }
    const cluster = makeCluster({
      port,
      dataDir,
      listen: opts.listen,
      logFile,
      run,
      destroy,
      adminOverSocket: !!opts.hba,
    });
    await cluster.waitReady();
    return cluster;
  } catch (err) {
    await destroy().catch(() => undefined);
    throw err;
  }
}

function makeCluster(c: {
  port: number;
  dataDir: string;
  listen: string[];
  logFile: string;
  run: (program: string, args: string[]) => Promise<string>;
  destroy: () => Promise<void>;
  adminOverSocket: boolean;
}): PgCluster & { waitReady(): Promise<void> } {
  const host = c.listen[0]!;
  const url = (database = 'postgres') =>
    `postgres://postgres@${isIP(host) === 6 ? `[${host}]` : host}:${c.port}/${database}`;

  const withAdmin = async <T>(fn: (client: pg.Client) => Promise<T>): Promise<T> => {
    const client = c.adminOverSocket
      ? new pg.Client({
          host: c.dataDir,
          port: c.port,
          user: 'postgres',
          database: 'postgres',
          application_name: ADMIN_APPLICATION_NAME,
        })
      : new pg.Client({ connectionString: url(), application_name: ADMIN_APPLICATION_NAME });
    client.on('error', () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end().catch(() => undefined);
    }
  };

  /** Waits until a TCP connection on the first listen address (the unix socket with custom pg_hba lines) runs a query. */
  const waitReady = async (): Promise<void> => {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      try {
        await withAdmin((client) => client.query('SELECT 1'));
        return;
      } catch (err) {
        if (Date.now() > deadline)
          throw new Error(
            `The private PostgreSQL cluster in ${c.dataDir} does not accept connections at ${url()} after ${READY_TIMEOUT_MS} ms: ${(err as Error).message}. See ${c.logFile}.`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };

  return {
    port: c.port,
    dataDir: c.dataDir,
    url,
    waitReady,
    async restart(mode) {
      await c.run('pg_ctl', ['-D', c.dataDir, '-m', mode, '-w', 'stop']);
      await c.run('pg_ctl', [
        '-D',
        c.dataDir,
        '-l',
        c.logFile,
        '-w',
        '-t',
        String(READY_TIMEOUT_MS / 1000),
        'start',
      ]);
      await waitReady();
    },
    async terminateBackends({ applicationNamePrefix, inTransaction = false }) {
      return await withAdmin(async (client) => {
        const { rows } = await client.query<{ terminated: number }>(
          `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS terminated
             FROM pg_stat_activity
            WHERE backend_type = 'client backend'
              AND pid <> pg_backend_pid()
              AND starts_with(application_name, $1)
              AND (NOT $2 OR xact_start IS NOT NULL)`,
          [applicationNamePrefix, inTransaction],
        );
        return rows[0]!.terminated;
      });
    },
    destroy: c.destroy,
  };
}
