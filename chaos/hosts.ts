// The chaos harness's simulated hosts. As root, each host is a network namespace `tmk-h<i>`
// joined by a veth pair to one bridge `tmk-br0` (10.213.0.1/24) in the root namespace, where
// the servers listen: a host reaches the bridge address and nothing else (no default route, its
// own loopback), and a partition drops every non-loopback packet inside its namespace (iptables,
// silently, like a pulled cable). Without root, or when `ip netns add` is refused, hosts are
// plain processes on loopback and cannot be partitioned.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Hosts {
  /** 'netns': each host is a network namespace; 'processes': plain processes on loopback. */
  readonly mode: 'netns' | 'processes';
  /** One line for the output saying which mode and, for the fallback, why (e.g. "not root"). */
  readonly note: string;
  /** Where servers must listen and hosts reach them: the bridge address (e.g. 10.213.0.1) or 127.0.0.1. */
  readonly serverAddress: string;
  /** 'h1', 'h2', ... */
  readonly names: readonly string[];
  /** How to spawn a command on a host: in netns mode wrapped in `ip netns exec tmk-<host>`. */
  command(host: string, command: string, args: string[]): { command: string; args: string[] };
  /** netns mode only (throws a clear error in processes mode): cut the host off from every
   *  server; packets are dropped silently (no RST, like a pulled cable), established
   *  connections hang. */
  partition(host: string): Promise<void>;
  heal(host: string): Promise<void>;
  partitioned(host: string): boolean;
  /** Removes every namespace, link, bridge and rule it made. Idempotent. */
  destroy(): Promise<void>;
}

export interface HostsOptions {
  count: number;
  /** Forces a mode; by default netns when root and `ip netns add` works, else processes. */
  mode?: 'netns' | 'processes';
  /**
   * Names of what it makes (default "tmk-") and its /24 (default "10.213.0"): two harnesses that
   * run at once (the suite runs test files side by side) need their own, as each removes every
   * leftover of its prefix when it starts.
   */
  prefix?: string;
  subnet?: string;
}

interface Net {
  prefix: string;
  bridge: string;
  subnet: string;
  bridgeAddress: string;
}

const netOf = (opts: HostsOptions): Net => {
  const prefix = opts.prefix ?? 'tmk-';
  const subnet = opts.subnet ?? '10.213.0';
  if (!/^[a-z]{1,6}-$/.test(prefix))
    throw new Error(`createHosts: prefix "${prefix}" must be 1-6 letters and a dash`);
  if (!/^\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(subnet))
    throw new Error(`createHosts: subnet "${subnet}" must be like 10.213.0`);
  return { prefix, bridge: `${prefix}br0`, subnet, bridgeAddress: `${subnet}.1` };
};
const maxHosts = 50;

/** `ip`/`iptables` with the failing command and its stderr in the error. */
async function sh(command: string, args: string[]): Promise<string> {
  try {
    return (await run(command, args)).stdout;
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(`${command} ${args.join(' ')} failed: ${(e.stderr ?? '').trim() || e.message}`);
  }
}

/** Names of the `tmk-*` namespaces, or links in the root namespace, that exist now. */
async function existing(prefix: string, what: 'netns' | 'link'): Promise<string[]> {
  const out = what === 'netns' ? await sh('ip', ['netns', 'list']) : await sh('ip', ['-o', 'link', 'show']);
  return out
    .split('\n')
    .map((line) => (what === 'netns' ? line.split(' ')[0] : line.split(': ')[1]?.split('@')[0]) ?? '')
    .filter((name) => name.startsWith(prefix));
}

/**
 * Removes every `tmk-*` link and namespace, e.g. from a crashed run. Links first: deleting a
 * veth end deletes its peer at once, while a deleted namespace's veth lingers in the root
 * namespace until the kernel's asynchronous namespace clean-up gets to it.
 */
async function removeLeftovers(prefix: string): Promise<void> {
  for (const name of await existing(prefix, 'link'))
    await run('ip', ['link', 'delete', name]).catch(() => {});
  for (const name of await existing(prefix, 'netns')) await sh('ip', ['netns', 'delete', name]);
}

function hostNames(count: number): string[] {
  if (!Number.isInteger(count) || count < 1 || count > maxHosts) {
    throw new Error(`createHosts: count must be an integer from 1 to ${maxHosts}, got ${count}`);
  }
  return Array.from({ length: count }, (_, i) => `h${i + 1}`);
}

function checkHost(names: readonly string[], host: string): void {
  if (!names.includes(host)) throw new Error(`unknown host "${host}"; the hosts are ${names.join(', ')}`);
}

function processHosts(names: string[], why: string): Hosts {
  const notNetns = (what: string) =>
    Promise.reject(
      new Error(
        `${what} needs netns mode, but the hosts are plain processes (${why}); run as root for partitions`,
      ),
    );
  return {
    mode: 'processes',
    note: `hosts: ${names.length} plain processes on 127.0.0.1 (${why}); no partitions`,
    serverAddress: '127.0.0.1',
    names,
    command(host, command, args) {
      checkHost(names, host);
      return { command, args };
    },
    partition: (host) => (checkHost(names, host), notNetns(`partition(${host})`)),
    heal: (host) => (checkHost(names, host), notNetns(`heal(${host})`)),
    partitioned: (host) => (checkHost(names, host), false),
    destroy: async () => {},
  };
}

/** The bridge and one namespace per host; on any failure everything made so far is removed. */
async function build(names: string[], { prefix, bridge, subnet, bridgeAddress }: Net): Promise<void> {
  try {
    const taken = (await sh('ip', ['-o', '-4', 'addr', 'show', 'to', `${subnet}.0/24`])).trim();
    if (taken) {
      throw new Error(
        `createHosts: ${subnet}.0/24, the hosts' subnet, is already in use by another interface:\n${taken}\n` +
          'remove that address (ip addr del) or stop what made it',
      );
    }
    await sh('ip', ['link', 'add', bridge, 'type', 'bridge']);
    await sh('ip', ['addr', 'add', `${bridgeAddress}/24`, 'dev', bridge]);
    await sh('ip', ['link', 'set', bridge, 'up']);
    for (const [i, host] of names.entries()) {
      const ns = prefix + host;
      // The namespace exists already (made by the caller to probe for netns support) for h1.
      if (i > 0) await sh('ip', ['netns', 'add', ns]);
      // Root end named like the namespace, the namespace's end is its eth0.
      await sh('ip', ['link', 'add', ns, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      await sh('ip', ['link', 'set', ns, 'master', bridge, 'up']);
      await sh('ip', ['-n', ns, 'addr', 'add', `${subnet}.${11 + i}/24`, 'dev', 'eth0']);
      await sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      await sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    }
  } catch (error) {
    await removeLeftovers(prefix).catch(() => {});
    throw error;
  }
}

/** The iptables rules of a partition: everything but loopback, both ways. */
function partitionRules(action: '-A' | '-D'): string[][] {
  return [
    [action, 'INPUT', '!', '-i', 'lo', '-j', 'DROP'],
    [action, 'OUTPUT', '!', '-o', 'lo', '-j', 'DROP'],
  ];
}

function netnsHosts(names: string[], { prefix, bridge, bridgeAddress }: Net): Hosts {
  const cut = new Set<string>();
  let destroyed = false;
  const live = (what: string, host: string) => {
    if (destroyed) throw new Error(`${what}: the hosts were destroyed`);
    checkHost(names, host);
  };
  const iptables = async (host: string, rule: string[]) => {
    try {
      await sh('ip', ['netns', 'exec', prefix + host, 'iptables', '-w', ...rule]);
    } catch (error) {
      throw new Error(`${(error as Error).message} (is iptables installed? apt-get install iptables)`);
    }
  };
  return {
    mode: 'netns',
    note: `hosts: ${names.length} network namespaces (${prefix}h1..) on bridge ${bridge} ${bridgeAddress}/24`,
    serverAddress: bridgeAddress,
    names,
    command(host, command, args) {
      live('command', host);
      return { command: 'ip', args: ['netns', 'exec', prefix + host, command, ...args] };
    },
    async partition(host) {
      live('partition', host);
      if (cut.has(host)) return;
      for (const rule of partitionRules('-A')) await iptables(host, rule);
      cut.add(host);
    },
    async heal(host) {
      live('heal', host);
      if (!cut.has(host)) return;
      for (const rule of partitionRules('-D')) await iptables(host, rule);
      cut.delete(host);
    },
    partitioned(host) {
      checkHost(names, host);
      return cut.has(host);
    },
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      cut.clear();
      // Each veth pair goes with its root end (at once, unlike with its namespace); the
      // iptables rules go with the namespace.
      for (const host of names) {
        await run('ip', ['link', 'delete', prefix + host]).catch(() => {});
        await run('ip', ['netns', 'delete', prefix + host]).catch(() => {});
      }
      await run('ip', ['link', 'delete', bridge]).catch(() => {});
    },
  };
}

/** Simulated hosts: network namespaces when possible (root), plain processes otherwise. */
export async function createHosts(opts: HostsOptions): Promise<Hosts> {
  const names = hostNames(opts.count);
  const net = netOf(opts);
  if (opts.mode === 'processes') return processHosts(names, 'processes mode was asked for');
  const forced = opts.mode === 'netns';
  const fallback = (why: string) => {
    if (forced) throw new Error(`createHosts: netns mode was asked for but ${why}`);
    return processHosts(names, why);
  };
  if (process.getuid?.() !== 0) return fallback('not root');
  await removeLeftovers(net.prefix);
  try {
    await sh('ip', ['netns', 'add', `${net.prefix}${names[0]}`]);
  } catch (error) {
    return fallback(`ip netns add failed: ${(error as Error).message}`);
  }
  await build(names, net);
  return netnsHosts(names, net);
}
