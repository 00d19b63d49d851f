// What the fault suite counts: each violation the independent checker finds (once per subject,
// charged to the fault kind of the round that first saw it), each kind's injections and recovery
// times, effects that ended in doubt, stalls, harness errors and resource samples; and the run's
// results made of them.
import { sql } from 'kysely';
import { ledger } from '../db/ledger-schema.js';
import {
  checkBackupInvariants,
  checkInvariants,
  type BackupLayout,
  type CheckResult,
} from '../test/helpers/invariants.js';
import { LIVE_JOB, drillJob, type WindowPath } from './catalog.js';
import { FAULT_KINDS, type FaultKind } from './faults.js';
import { emptyFigures, percentile, type ChaosResults, type KindFigures, type PathFigures } from './report.js';
import type { Stack } from './stack.js';
import { persist } from './waits.js';
import type { Win } from './workload.js';

export class Tally {
  private readonly figures = new Map<FaultKind, KindFigures>(FAULT_KINDS.map((k) => [k, emptyFigures()]));
  private readonly seen = new Set<string>();
  readonly violations: { kind: FaultKind | 'final' | 'warm-up'; text: string }[] = [];
  private readonly inDoubtSeen = new Map<string, number>();
  private readonly totals = new Map<keyof KindFigures, number>();
  injected = 0;
  stalls = 0;
  rounds = 0;
  private readonly paths: Record<WindowPath, PathFigures> = {
    local: { lanes: [], rounds: 0, injected: 0 },
    task: { lanes: [], rounds: 0, injected: 0 },
    batch: { lanes: [], rounds: 0, injected: 0 },
    drill: { lanes: [], rounds: 0, injected: 0 },
  };

  /** A fault round of `lane` whose windows ran on `path`. */
  onPath(path: WindowPath, lane: number, injected: number): void {
    const p = this.paths[path];
    if (!p.lanes.includes(lane)) p.lanes = [...p.lanes, lane].sort((a, b) => a - b);
    p.rounds++;
    p.injected += injected;
  }
  readonly harnessErrors: string[] = [];
  readonly samples: ChaosResults['resources'] = [];

  constructor(
    private readonly stack: Stack,
    private readonly log: (line: string) => void,
    /** Lane `lane`'s backup job: where its objects are, its scratch database, its source's counts. */
    private readonly backupLayout: (lane: number) => BackupLayout,
  ) {}

  violation(kind: FaultKind | 'final' | 'warm-up', text: string, figure: keyof KindFigures): void {
    // One defect, one count: by its subject (a window, a day's total, an effect, an incident), as
    // its text changes while later rounds add windows; charged to the round that first saw it.
    const subject = text.includes(': ') ? text.slice(0, text.indexOf(': ')) : text;
    if (this.seen.has(subject)) return;
    this.seen.add(subject);
    this.violations.push({ kind, text });
    this.log(`VIOLATION (${kind}): ${text}`);
    this.totals.set(figure, (this.totals.get(figure) ?? 0) + 1);
    if (kind !== 'final' && kind !== 'warm-up') {
      const fig = this.figures.get(kind)!;
      (fig[figure] as number)++;
    }
  }

  async check(job: string, windows: readonly Win[], kind: FaultKind | 'final' | 'warm-up'): Promise<void> {
    const result: CheckResult = await persist('check', () =>
      checkInvariants(
        this.stack.db,
        job,
        windows,
        { emails: this.stack.smtp.messages, chat: this.stack.chat.messages },
        // Every window of the chaos catalog sends its report (chaos/catalog.ts).
        { effectsPerWindow: ['report'] },
      ),
    );
    this.charged(result, kind);
    if (kind !== 'final' && kind !== 'warm-up') await this.inDoubt(job, kind);
  }

  /** Lane `lane`'s backup job over its windows so far: each done once, drilled, nothing left behind. */
  async checkBackups(
    lane: number,
    windows: readonly Win[],
    kind: FaultKind | 'final' | 'warm-up',
  ): Promise<void> {
    const result = await persist('check backups', () =>
      checkBackupInvariants(
        this.stack.db,
        drillJob(lane),
        windows,
        { emails: this.stack.smtp.messages, chat: this.stack.chat.messages },
        this.backupLayout(lane),
      ),
    );
    this.charged(result, kind);
  }

  private charged(result: CheckResult, kind: FaultKind | 'final' | 'warm-up'): void {
    for (const text of result.duplicates)
      this.violation(
        kind,
        text,
        text.startsWith('alert about') || text.startsWith('effect alert:')
          ? 'duplicate_alerts'
          : text.startsWith('effect ')
            ? 'duplicate_effects'
            : 'duplicate_windows',
      );
    for (const text of result.lost)
      this.violation(
        kind,
        text,
        text.startsWith('effect ') || text.startsWith('alert about') ? 'lost_effects' : 'lost_windows',
      );
    for (const text of result.unalertedUnknowns) this.violation(kind, text, 'unalerted_unknowns');
    for (const text of result.other) this.violation(kind, text, 'other');
  }

  /** The job's effects in doubt that the round added. */
  private async inDoubt(job: string, kind: FaultKind): Promise<void> {
    // Like the check, through another lane's server restart.
    const inDoubt = await persist('count the effects in doubt', () =>
      sql<{ n: number }>`
        select count(*)::int as n from ${ledger(this.stack.db).effects}
         where job = ${job} and status in ('unknown', 'failed') and effect_key not like 'alert:%'`.execute(
        this.stack.db,
      ),
    );
    const fig = this.figures.get(kind)!;
    const before = this.inDoubtSeen.get(job) ?? 0;
    fig.unknown_alerted += Math.max(0, inDoubt.rows[0]!.n - before);
    this.inDoubtSeen.set(job, inDoubt.rows[0]!.n);
  }

  /** A fault round's figures: its injections, those that met no work open, each one's recovery. */
  async charge(
    kind: FaultKind,
    injectedAt: readonly number[],
    idle: readonly Promise<boolean>[],
    recoveredAt: number,
  ): Promise<void> {
    this.injected += injectedAt.length;
    const fig = this.figures.get(kind)!;
    fig.rounds++;
    fig.injected += injectedAt.length;
    fig.injected_idle += (await Promise.all(idle)).filter(Boolean).length;
    if (injectedAt.length) fig.recoveryMs.push(...injectedAt.map((t) => recoveredAt - t));
  }

  /** The run's results, from what was counted and what the driver says of the run. */
  results(run: {
    seed: number;
    started: number;
    lanes: number;
    windowsChecked: number;
    liveWindows: number;
  }): ChaosResults {
    const kinds = Object.fromEntries(
      [...this.figures].map(([k, f]) => [
        k,
        {
          ...f,
          recoveryMs: undefined,
          recovery_p50_ms: percentile(f.recoveryMs, 50),
          recovery_p99_ms: percentile(f.recoveryMs, 99),
        },
      ]),
    ) as unknown as ChaosResults['kinds'];
    const sum = (key: keyof KindFigures) => this.totals.get(key) ?? 0;
    const waits = this.stack.workers.lives.reduce(
      (n, l) => n + (l.output.match(new RegExp(`WAITING job=${LIVE_JOB} `, 'g')) ?? []).length,
      0,
    );
    return {
      seed: run.seed,
      started_at: new Date(run.started).toISOString(),
      duration_s: Math.round((Date.now() - run.started) / 1000),
      hosts: {
        mode: this.stack.hosts.mode,
        note: this.stack.hosts.note,
        count: this.stack.hosts.names.length,
      },
      clock_skew_mechanism: this.stack.clockMechanism,
      lanes: run.lanes,
      rounds: this.rounds,
      windows_checked: run.windowsChecked,
      live_windows: run.liveWindows,
      paths: this.paths,
      live_windows_waited_for_skew: waits,
      worker_lives: this.stack.workers.lives.length,
      faults_injected: this.injected,
      duplicate_effects: sum('duplicate_effects'),
      duplicate_windows: sum('duplicate_windows'),
      lost_windows: sum('lost_windows'),
      lost_effects: sum('lost_effects'),
      unalerted_unknowns: sum('unalerted_unknowns'),
      duplicate_alerts: sum('duplicate_alerts'),
      other_violations: sum('other'),
      stalled_rounds: this.stalls,
      harness_errors: this.harnessErrors,
      final_violations: this.violations.filter((v) => v.kind === 'final').map((v) => v.text),
      violations: this.violations.map((v) => `${v.kind}: ${v.text}`),
      kinds,
      resources: this.samples,
    };
  }
}
