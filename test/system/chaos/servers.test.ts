// The chaos harness's own servers: a private PostgreSQL cluster that can be crashed, restarted
// and have its backends killed, and a Temporal dev server process that can be SIGKILLed and
// started again on its persistence file, with clients and workers staying connected across it.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import pg from 'pg';
import { startPgCluster, type PgCluster } from '../../../chaos/pg-cluster.js';
import { startTemporalProcess, type TemporalProcess } from '../../../chaos/temporal-process.js';
import { SEARCH_ATTRIBUTES } from '../../../contract/search-attributes.js';
import { uniqueQueue } from '../../helpers/temporal.js';

/** Whether something accepts TCP connections on host:port right now. */
function answers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** A connected client that records its connection error instead of crashing the test process. */
async function pgClient(url: string, applicationName: string): Promise<pg.Client & { lost: () => boolean }> {
  const client = new pg.Client({ connectionString: url, application_name: applicationName });
  let lost = false;
  client.on('error', () => (lost = true));
  await client.connect();
  return Object.assign(client, { lost: () => lost });
}

/** Makes a server's temp dir look like the leftover of a run that was SIGKILLed (its maker is dead). */
function orphan(dir: string): void {
  const deadPid = spawnSync('true').pid!;
  const markFile = join(dir, 'owner.json');
  writeFileSync(markFile, JSON.stringify({ ...JSON.parse(readFileSync(markFile, 'utf8')), owner: deadPid }));
}

describe('private PostgreSQL cluster', () => {
  let cluster: PgCluster;
  before(async () => {
    cluster = await startPgCluster({ listen: ['127.0.0.1', '127.0.0.2'] });
  });
  after(async () => {
    await cluster?.destroy();
  });

  test('is its own server, reachable on every listen address', async () => {
    assert.notEqual(cluster.port, 5432);
    assert.equal(cluster.url(), `postgres://postgres@127.0.0.1:${cluster.port}/postgres`);
    assert.equal(cluster.url('other'), `postgres://postgres@127.0.0.1:${cluster.port}/other`);
    assert.ok(existsSync(`${cluster.dataDir}/PG_VERSION`));
    const second = await pgClient(`postgres://postgres@127.0.0.2:${cluster.port}/postgres`, 'servers-test');
    const { rows } = await second.query<{ dir: string }>("SELECT current_setting('data_directory') AS dir");
    assert.equal(rows[0]?.dir, cluster.dataDir);
    await second.end();
  });

  test("restart('immediate') ends open transactions, keeps committed data, and answers after", async () => {
    const setup = await pgClient(cluster.url(), 'servers-test-setup');
    await setup.query('CREATE TABLE kept (v int)');
    await setup.query('INSERT INTO kept VALUES (1)');
    await setup.end();
    const holder = await pgClient(cluster.url(), 'servers-test-holder');
    await holder.query('BEGIN');
    await holder.query('INSERT INTO kept VALUES (2)');

    await cluster.restart('immediate');
    await assert.rejects(holder.query('SELECT 1'));
    assert.ok(holder.lost(), 'the client in a transaction saw its connection end');

    const after1 = await pgClient(cluster.url(), 'servers-test-after');
    assert.deepEqual((await after1.query('SELECT v FROM kept ORDER BY v')).rows, [{ v: 1 }]);
    await after1.query('INSERT INTO kept VALUES (3)');
    await after1.end();

    await cluster.restart('fast');
    const after2 = await pgClient(cluster.url(), 'servers-test-after');
    assert.deepEqual((await after2.query('SELECT v FROM kept ORDER BY v')).rows, [{ v: 1 }, { v: 3 }]);
    await after2.end();
  });

  test('terminateBackends kills only the matching application names (in a transaction when asked)', async () => {
    const inTx = await pgClient(cluster.url(), 'victim-in-tx');
    const idle = await pgClient(cluster.url(), 'victim-idle');
    const bystander = await pgClient(cluster.url(), 'bystander');
    await inTx.query('BEGIN');
    await inTx.query('SELECT 1');
    await bystander.query('BEGIN');
    await bystander.query('SELECT 1');

    assert.equal(
      await cluster.terminateBackends({ applicationNamePrefix: 'victim', inTransaction: true }),
      1,
    );
    await assert.rejects(inTx.query('SELECT 1'));
    await idle.query('SELECT 1');
    await bystander.query('COMMIT');

    assert.equal(await cluster.terminateBackends({ applicationNamePrefix: 'victim' }), 1);
    await assert.rejects(idle.query('SELECT 1'));
    await bystander.query('SELECT 1');
    assert.equal(await cluster.terminateBackends({ applicationNamePrefix: 'nobody' }), 0);
    await bystander.end();
  });

  test('destroy stops the server and removes its directory, and may be called again', async () => {
    const { port, dataDir } = cluster;
    assert.ok(await answers('127.0.0.1', port));
    await cluster.destroy();
    assert.equal(existsSync(dataDir), false);
    assert.equal(await answers('127.0.0.1', port), false);
    assert.equal(await answers('127.0.0.2', port), false);
    await cluster.destroy();
  });

  test('a later start stops and removes the cluster of a run that died', async () => {
    const leftover = await startPgCluster({ listen: ['127.0.0.1'] });
    orphan(dirname(leftover.dataDir));
    const next = await startPgCluster({ listen: ['127.0.0.1'] });
    try {
      assert.equal(existsSync(leftover.dataDir), false);
      assert.equal(await answers('127.0.0.1', leftover.port), false);
      assert.ok(await answers('127.0.0.1', next.port));
    } finally {
      await Promise.all([next.destroy(), leftover.destroy()]);
    }
  });
});

const echoWorkflows = fileURLToPath(new URL('../../fixtures/echo-workflow.ts', import.meta.url));

describe('Temporal dev server process', () => {
  let server: TemporalProcess;
  let connection: Connection;
  let client: Client;
  before(async () => {
    server = await startTemporalProcess({ ip: '127.0.0.1' });
    connection = await Connection.connect({ address: server.address });
    client = new Client({ connection });
  });
  after(async () => {
    await connection?.close();
    await server?.destroy();
  });

  const customAttributes = async () =>
    Object.keys(
      (await connection.operatorService.listSearchAttributes({ namespace: 'default' })).customAttributes ??
        {},
    );

  test('kill and start keep its state, and a connection opened before works after', async () => {
    for (const { name } of SEARCH_ATTRIBUTES) assert.ok((await customAttributes()).includes(name), name);
    const taskQueue = uniqueQueue('nobody-polls');
    const handle = await client.workflow.start('neverPolled', { taskQueue, workflowId: taskQueue, args: [] });
    const [host, port] = [server.address.split(':')[0]!, Number(server.address.split(':')[1])];

    await server.kill();
    assert.equal(await answers(host, port), false, 'the killed server no longer answers');
    await server.start();
    assert.equal(server.address, `${host}:${port}`);

    // The same Connection and Client as before the kill.
    const description = await handle.describe();
    assert.equal(description.status.name, 'RUNNING');
    assert.equal(description.runId, handle.firstExecutionRunId);
    for (const { name } of SEARCH_ATTRIBUTES) assert.ok((await customAttributes()).includes(name), name);
    await handle.terminate('test over');
  });

  test('a worker running across kill and start keeps polling and completes a workflow started after', async () => {
    const taskQueue = uniqueQueue('echo');
    const native = await NativeConnection.connect({ address: server.address });
    const worker = await Worker.create({
      connection: native,
      taskQueue,
      workflowBundle: await bundleWorkflowCode({ workflowsPath: echoWorkflows, logger: quietBundler }),
      activities: { echoActivity: async (text: string) => `echo ${text}` },
      shutdownGraceTime: '1s',
    });
    const running = worker.run();
    try {
      const run = (text: string) =>
        client.workflow.execute('echo', { taskQueue, workflowId: uniqueQueue(text), args: [text] });
      assert.equal(await run('before'), 'echo before');

      await server.kill();
      await server.start();
      assert.equal(await run('after'), 'echo after');
      assert.equal(worker.getState(), 'RUNNING');
    } finally {
      worker.shutdown();
      await running;
      await native.close();
    }
  });

  test('destroy kills it and removes its files, and may be called again', async () => {
    const [host, port] = [server.address.split(':')[0]!, Number(server.address.split(':')[1])];
    await server.destroy();
    assert.equal(existsSync(server.dbFile), false);
    assert.equal(await answers(host, port), false, 'the destroyed server no longer answers');
    await server.destroy();
  });

  test('a later start kills and removes the server of a run that died', async () => {
    const leftover = await startTemporalProcess({ ip: '127.0.0.1' });
    const [host, port] = [leftover.address.split(':')[0]!, Number(leftover.address.split(':')[1])];
    orphan(dirname(leftover.dbFile));
    const next = await startTemporalProcess({ ip: '127.0.0.1' });
    try {
      assert.equal(existsSync(leftover.dbFile), false);
      assert.equal(await answers(host, port), false);
    } finally {
      await Promise.all([next.destroy(), leftover.destroy()]);
    }
  });
});

const quietBundler = { trace() {}, debug() {}, info() {}, warn() {}, error: console.error, log() {} };
