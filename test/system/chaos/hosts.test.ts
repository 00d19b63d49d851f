// The chaos harness's simulated hosts (chaos/hosts.ts), for real: network namespaces that reach
// the bridge address and nothing else, a partition that silently stalls an established TCP
// connection and a heal that lets the same connection carry data again, a destroy that leaves
// nothing behind, the clean-up of a crashed run's leftovers, and the plain-process fallback.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { createHosts, type Hosts } from '../../../chaos/hosts.js';

const run = promisify(execFile);
// Not the fault suite's own names and subnet: its test may run at the same time as this one.
const NET = { prefix: 'tmkt-', subnet: '10.214.0' };
const hostsModule = fileURLToPath(new URL('../../../chaos/hosts.ts', import.meta.url));

/** Node code run on a host: connects to argv host:port, prints events as lines, relays stdin lines. */
const probe = `
const net = require('node:net');
const readline = require('node:readline');
const [host, port, mode] = process.argv.slice(1);
const socket = net.connect(Number(port), host);
socket.setEncoding('utf8');
socket.on('connect', () => {
  console.log('connected');
  if (mode === 'once') socket.end();
  else readline.createInterface({ input: process.stdin }).on('line', (l) => socket.write(l + '\\n'));
});
socket.on('data', (d) => { for (const l of d.split('\\n')) if (l) console.log('data ' + l); });
socket.on('error', (e) => { console.log('error ' + e.code); process.exit(0); });
socket.on('close', () => { console.log('closed'); process.exit(0); });
`;

async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 20_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A TCP echo server in the root namespace; remembers what each connection received. */
async function echoServer(
  address: string,
): Promise<{ port: number; received: string[][]; server: Server; sockets: Socket[] }> {
  const received: string[][] = [];
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    const lines: string[] = [];
    received.push(lines);
    sockets.push(socket);
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      for (const l of d.split('\n')) if (l) lines.push(l);
      socket.write(d);
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, address, r));
  return { port: (server.address() as { port: number }).port, received, server, sockets };
}

async function closeServer(s: { server: Server; sockets: Socket[] }): Promise<void> {
  for (const socket of s.sockets) socket.destroy();
  await new Promise((r) => s.server.close(r));
}

/** Starts the probe on a host; its output lines as they come. */
function startProbe(hosts: Hosts, host: string, address: string, port: number, mode: 'once' | 'relay') {
  const { command, args } = hosts.command(host, process.execPath, ['-e', probe, address, String(port), mode]);
  const child: ChildProcess = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  let buffer = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (d: string) => {
    buffer += d;
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    lines,
    stderr: () => stderr,
    send: (line: string) => child.stdin!.write(line + '\n'),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The probe's verdict on one connection attempt from a host: 'connected' or 'error <code>'. */
async function tryConnect(hosts: Hosts, host: string, address: string, port: number): Promise<string> {
  const p = startProbe(hosts, host, address, port, 'once');
  await p.exited;
  const verdict = p.lines.find((l) => l === 'connected' || l.startsWith('error '));
  assert.ok(
    verdict,
    `probe on ${host} to ${address}:${port} said nothing useful: ${p.lines.join('|')} ${p.stderr()}`,
  );
  return verdict;
}

async function netnsList(): Promise<string[]> {
  const { stdout } = await run('ip', ['netns', 'list']);
  return stdout
    .split('\n')
    .map((l) => l.split(' ')[0]!)
    .filter((n) => n.startsWith('tmkt-'));
}

async function tmkLinks(): Promise<string[]> {
  const { stdout } = await run('ip', ['-o', 'link', 'show']);
  return stdout
    .split('\n')
    .map((l) => l.split(': ')[1]?.split('@')[0] ?? '')
    .filter((n) => n.startsWith('tmkt-'));
}

/**
 * How many times in a row the retransmission timer of the host's connection to port fired
 * without an ACK (`backoff` in `ss -i` inside its namespace; 0 when absent).
 */
async function backoff(hosts: Hosts, host: string, port: number): Promise<number> {
  const { command, args } = hosts.command(host, 'ss', ['-tni', 'dst', `${hosts.serverAddress}:${port}`]);
  const { stdout } = await run(command, args);
  const match = /\bbackoff:(\d+)/.exec(stdout);
  return match ? Number(match[1]) : 0;
}

test('netns hosts reach the server address and nothing else', async () => {
  const hosts = await createHosts({ count: 3, ...NET });
  const loopbackOnly = await echoServer('127.0.0.1');
  let server: Awaited<ReturnType<typeof echoServer>> | undefined;
  try {
    assert.equal(hosts.mode, 'netns', hosts.note);
    assert.equal(hosts.serverAddress, '10.214.0.1');
    assert.deepEqual(hosts.names, ['h1', 'h2', 'h3']);
    assert.deepEqual((await netnsList()).sort(), ['tmkt-h1', 'tmkt-h2', 'tmkt-h3']);
    server = await echoServer(hosts.serverAddress);
    for (const host of hosts.names) {
      assert.equal(await tryConnect(hosts, host, hosts.serverAddress, server.port), 'connected', host);
      // The root namespace's loopback is not the host's loopback: nothing listens there.
      assert.equal(await tryConnect(hosts, host, '127.0.0.1', loopbackOnly.port), 'error ECONNREFUSED', host);
      // No default route: the outside world and the root's other addresses are unreachable.
      assert.equal(await tryConnect(hosts, host, '192.0.2.2', 5432), 'error ENETUNREACH', host);
      const route = hosts.command(host, 'ip', ['route']);
      const { stdout } = await run(route.command, route.args);
      assert.doesNotMatch(stdout, /default/, `${host} has a default route:\n${stdout}`);
    }
    assert.equal(server.received.length, 3);
    assert.equal(loopbackOnly.received.length, 0);
    assert.throws(() => hosts.command('h4', 'true', []), /unknown host "h4".*h1, h2, h3/);
  } finally {
    if (server) await closeServer(server);
    await closeServer(loopbackOnly);
    await hosts.destroy();
  }
});

test('a partition silently stalls an established connection; heal resumes the same connection', async () => {
  const hosts = await createHosts({ count: 2, ...NET });
  const server = await echoServer(hosts.serverAddress);
  const client = startProbe(hosts, 'h1', hosts.serverAddress, server.port, 'relay');
  try {
    await waitFor('the probe to connect', () => client.lines.includes('connected'));
    client.send('before');
    await waitFor('the echo before the partition', () => client.lines.includes('data before'));

    await hosts.partition('h1');
    assert.equal(hosts.partitioned('h1'), true);
    assert.equal(hosts.partitioned('h2'), false);
    const sentAt = Date.now();
    client.send('during');
    // No ACK comes: TCP's retransmission timer fires and backs off (no RST, no error).
    await waitFor(
      'a retransmission timeout during the partition',
      async () => (await backoff(hosts, 'h1', server.port)) >= 1,
    );
    // A new connection attempt hangs too (no refusal, no unreachable error).
    const newcomer = startProbe(hosts, 'h1', hosts.serverAddress, server.port, 'once');
    // A couple of seconds without an error or a close: the connection just hangs.
    await waitFor('two seconds of partition', () => Date.now() - sentAt >= 2_000);
    assert.deepEqual(client.lines, ['connected', 'data before'], client.stderr());
    assert.deepEqual(newcomer.lines, [], newcomer.stderr());
    await newcomer.stop();
    assert.deepEqual(server.received, [['before']]);
    // The other host is unaffected.
    assert.equal(await tryConnect(hosts, 'h2', hosts.serverAddress, server.port), 'connected');

    await hosts.heal('h1');
    assert.equal(hosts.partitioned('h1'), false);
    await waitFor('the echo after heal', () => client.lines.includes('data during'));
    client.send('after');
    await waitFor('a second echo after heal', () => client.lines.includes('data after'));
    assert.deepEqual(client.lines, ['connected', 'data before', 'data during', 'data after']);
    // Same connection: the server saw all three lines on its first connection.
    assert.deepEqual(server.received[0], ['before', 'during', 'after']);
  } finally {
    await client.stop();
    await closeServer(server);
    await hosts.destroy();
  }
});

test('destroy removes every namespace and link, and is idempotent', async () => {
  const hosts = await createHosts({ count: 2, ...NET });
  await hosts.partition('h2');
  assert.deepEqual((await netnsList()).sort(), ['tmkt-h1', 'tmkt-h2']);
  await hosts.destroy();
  await hosts.destroy();
  assert.deepEqual(await netnsList(), []);
  assert.deepEqual(await tmkLinks(), []);
  await assert.rejects(run('ip', ['link', 'show', 'tmkt-br0']), /does not exist/);
  assert.throws(() => hosts.command('h1', 'true', []), /destroyed/);
});

test('createHosts cleans up the leftovers of a crashed run', async () => {
  // A separate process makes three hosts, partitions one, and exits without destroy.
  const crash = `import { createHosts } from ${JSON.stringify(hostsModule)};
const hosts = await createHosts({ count: 3, ...${JSON.stringify(NET)} });
await hosts.partition('h3');
process.exit(0);`;
  await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', crash]);
  assert.deepEqual((await netnsList()).sort(), ['tmkt-h1', 'tmkt-h2', 'tmkt-h3']);
  assert.ok((await tmkLinks()).includes('tmkt-br0'));

  const hosts = await createHosts({ count: 1, ...NET });
  try {
    assert.deepEqual(await netnsList(), ['tmkt-h1']);
    assert.deepEqual((await tmkLinks()).sort(), ['tmkt-br0', 'tmkt-h1']);
    assert.equal(hosts.partitioned('h1'), false);
    const server = await echoServer(hosts.serverAddress);
    try {
      assert.equal(await tryConnect(hosts, 'h1', hosts.serverAddress, server.port), 'connected');
    } finally {
      await closeServer(server);
    }
  } finally {
    await hosts.destroy();
  }
  assert.deepEqual(await netnsList(), []);
});

test('processes mode: plain processes on loopback, no partitions', async () => {
  const hosts = await createHosts({ count: 2, mode: 'processes', ...NET });
  try {
    assert.equal(hosts.mode, 'processes');
    assert.match(hosts.note, /processes/);
    assert.equal(hosts.serverAddress, '127.0.0.1');
    assert.deepEqual(hosts.names, ['h1', 'h2']);
    assert.deepEqual(hosts.command('h2', 'node', ['-v']), { command: 'node', args: ['-v'] });
    assert.deepEqual(await netnsList(), []);
    const server = await echoServer(hosts.serverAddress);
    try {
      assert.equal(await tryConnect(hosts, 'h1', hosts.serverAddress, server.port), 'connected');
    } finally {
      await closeServer(server);
    }
    await assert.rejects(hosts.partition('h1'), /partition\(h1\) needs netns mode/);
    await assert.rejects(hosts.heal('h1'), /netns mode/);
    assert.equal(hosts.partitioned('h1'), false);
  } finally {
    await hosts.destroy();
    await hosts.destroy();
  }
});

test('auto mode falls back to processes when not root, saying why', async () => {
  // The process loads its modules as root, then becomes an unprivileged user (nobody) before
  // createHosts: `ip netns add` would be refused, so the fallback is taken. Dropping the
  // privileges inside the process, not with runuser before it starts, keeps the test independent
  // of whether that user can read the checkout (a clone in a mode-0700 folder) or its Node.js.
  const script = `import { createHosts } from ${JSON.stringify(hostsModule)};
import { execFileSync } from 'node:child_process';
const id = (flag) => Number(execFileSync('id', [flag, 'nobody'], { encoding: 'utf8' }).trim());
process.setgroups([]);
process.setgid(id('-g'));
process.setuid(id('-u'));
const hosts = await createHosts({ count: 1, ...${JSON.stringify(NET)} });
console.log(JSON.stringify({ uid: process.getuid(), mode: hosts.mode, note: hosts.note, serverAddress: hosts.serverAddress }));
await hosts.destroy();`;
  const { stdout } = await run(
    process.execPath,
    ['--import', import.meta.resolve('tsx'), '--input-type=module', '-e', script],
    { cwd: fileURLToPath(new URL('../../..', import.meta.url)) },
  );
  const result = JSON.parse(stdout.trim().split('\n').pop()!) as {
    uid: number;
    mode: string;
    note: string;
    serverAddress: string;
  };
  assert.notEqual(result.uid, 0, 'createHosts ran as an unprivileged user');
  assert.equal(result.mode, 'processes');
  assert.equal(result.serverAddress, '127.0.0.1');
  assert.match(result.note, /not root/);
});
