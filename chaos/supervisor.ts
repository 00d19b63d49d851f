// A supervised worker per simulated host, like systemd's Restart=always: a worker that dies is
// started again on its host. Keeps each worker life's output, and the host's clock offset.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Hosts } from './hosts.js';
import type { ChaosWorkerConfig } from './worker.js';

export interface WorkerLife {
  host: string;
  pid: number;
  startedAt: number;
  endedAt?: number;
  signal?: string | null;
  clockOffsetMs: number;
  output: string;
}

interface HostWorkersOptions {
  hosts: Hosts;
  script: URL;
  config: Omit<ChaosWorkerConfig, 'host' | 'nowOffsetMs' | 'crashable'>;
  /** A host whose worker never dies at an armed crash point (a soak run measures it). */
  steadyHost?: string;
  databaseUrl: (host: string) => string;
  temporalAddress: string;
  /** The environment and `now` offset that shift a process's clock by `offsetMs`. */
  clock: (offsetMs: number) => { env: Record<string, string>; nowOffsetMs: number };
  log: (line: string) => void;
}

export class HostWorkers {
  readonly lives: WorkerLife[] = [];
  private readonly current = new Map<
    string,
    { child: ChildProcess; life: WorkerLife; ready: Promise<void> }
  >();
  private readonly offsets = new Map<string, number>();
  private stopping = false;

  constructor(private readonly opts: HostWorkersOptions) {}

  async startAll(): Promise<void> {
    await Promise.all(this.opts.hosts.names.map((h) => this.spawn(h)));
  }

  offsetOf(host: string): number {
    return this.offsets.get(host) ?? 0;
  }

  pidOf(host: string): number | undefined {
    return this.current.get(host)?.child.pid;
  }

  /** Replaces the host's worker (a clean stop) with one whose clock is off by `offsetMs`. */
  async setClockOffset(host: string, offsetMs: number): Promise<void> {
    this.offsets.set(host, offsetMs);
    const cur = this.current.get(host);
    if (cur) {
      // The exit handler starts the new one. The worker may have died already (a crash point a
      // moment ago, killed by a signal: no exit code), its 'exit' gone: then nothing to wait for.
      if (cur.life.endedAt === undefined) {
        const exited = new Promise<void>((r) => cur.child.once('exit', () => r()));
        cur.child.kill('SIGTERM');
        await exited;
      }
    }
    await this.ready(host);
  }

  /** Waits until the host's current worker has said READY. */
  async ready(host: string): Promise<void> {
    for (;;) {
      const cur = this.current.get(host);
      if (cur) {
        await cur.ready;
        if (this.current.get(host) === cur && cur.life.endedAt === undefined) return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Freezes (SIGSTOP) or thaws (SIGCONT) the host's worker: a partition where namespaces are
   * unavailable; or kills it (SIGKILL), to be started again like one that died at a crash point.
   */
  signal(host: string, signal: 'SIGSTOP' | 'SIGCONT' | 'SIGKILL'): void {
    this.current.get(host)?.child.kill(signal);
  }

  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      [...this.current.values()].map(
        ({ child }) =>
          new Promise<void>((r) => {
            if (child.exitCode !== null || child.signalCode !== null) return r();
            child.once('exit', () => r());
            child.kill('SIGCONT');
            child.kill('SIGKILL');
          }),
      ),
    );
  }

  private spawn(host: string): Promise<void> {
    const offsetMs = this.offsetOf(host);
    const clock = this.opts.clock(offsetMs);
    const config: ChaosWorkerConfig = {
      ...this.opts.config,
      host,
      nowOffsetMs: clock.nowOffsetMs,
      crashable: host !== this.opts.steadyHost,
    };
    const { command, args } = this.opts.hosts.command(host, process.execPath, [
      '--import',
      'tsx',
      fileURLToPath(this.opts.script),
    ]);
    const child = spawn(command, args, {
      env: {
        ...process.env,
        ...clock.env,
        CHAOS_WORKER: JSON.stringify(config),
        DATABASE_URL: this.opts.databaseUrl(host),
        TEMPORAL_ADDRESS: this.opts.temporalAddress,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const life: WorkerLife = {
      host,
      pid: child.pid ?? -1,
      startedAt: Date.now(),
      clockOffsetMs: offsetMs,
      output: '',
    };
    this.lives.push(life);
    let readyResolve!: () => void;
    const ready = new Promise<void>((r) => (readyResolve = r));
    const onData = (d: Buffer) => {
      life.output += d;
      if (life.output.includes('READY host=')) readyResolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code, signal) => {
      life.endedAt = Date.now();
      life.signal = signal ?? String(code);
      readyResolve();
      if (this.stopping) return;
      // Restart=always, after a short pause (a crash loop must not spin).
      setTimeout(() => void this.spawn(host), 300);
    });
    this.current.set(host, { child, life, ready });
    return ready;
  }
}
