// The fault suite's figures: reliability/results.json for machines, RELIABILITY.md for people.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FAULT_KINDS, type FaultKind } from './faults.js';

export interface KindFigures {
  injected: number;
  /** Of those injected, the ones that met none of their round's work open (it had finished). */
  injected_idle: number;
  rounds: number;
  duplicate_effects: number;
  duplicate_windows: number;
  lost_windows: number;
  lost_effects: number;
  unalerted_unknowns: number;
  /** Alerts delivered again because their first delivery was in doubt (the `resend` policy). */
  duplicate_alerts: number;
  other: number;
  /** Effects that ended in doubt (unknown) or failed, each alerted. */
  unknown_alerted: number;
  recoveryMs: number[];
}

export const emptyFigures = (): KindFigures => ({
  injected: 0,
  injected_idle: 0,
  rounds: 0,
  duplicate_effects: 0,
  duplicate_windows: 0,
  lost_windows: 0,
  lost_effects: 0,
  unalerted_unknowns: 0,
  duplicate_alerts: 0,
  other: 0,
  unknown_alerted: 0,
  recoveryMs: [],
});

export function percentile(values: readonly number[], p: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export interface ChaosResults {
  /** The command that produced the run, to reproduce it. */
  command?: string;
  /** Set for a soak run: how long faults went on. */
  soak_ms?: number;
  seed: number;
  started_at: string;
  duration_s: number;
  hosts: { mode: string; note: string; count: number };
  clock_skew_mechanism: string;
  lanes: number;
  rounds: number;
  windows_checked: number;
  live_windows: number;
  /**
   * Rounds and faults by the path their windows ran on: local activities, activity tasks, a
   * batch activity (a batched backfill's rounds, on any lane), or a backup window with its restore
   * drill (drill rounds, on any lane; runs before these had none).
   */
  paths?: Record<'local' | 'task' | 'batch', PathFigures> & { drill?: PathFigures };
  live_windows_waited_for_skew: number;
  worker_lives: number;
  faults_injected: number;
  duplicate_effects: number;
  duplicate_windows: number;
  lost_windows: number;
  lost_effects: number;
  unalerted_unknowns: number;
  duplicate_alerts: number;
  other_violations: number;
  /** Rounds whose work took over 5 minutes to settle (slow, not lost). */
  stalled_rounds: number;
  /** Rounds the harness itself could not complete (not verified): must be none. */
  harness_errors: string[];
  final_violations: string[];
  violations: string[];
  kinds: Record<
    FaultKind,
    Omit<KindFigures, 'recoveryMs'> & { recovery_p50_ms: number | null; recovery_p99_ms: number | null }
  >;
  resources: { at: number; host: string; pid: number; rssKb: number; fds: number }[];
}

export interface PathFigures {
  lanes: number[];
  rounds: number;
  injected: number;
}

/** Headline: the four figures the guarantee is about are zero. */
export const clean = (r: ChaosResults): boolean =>
  r.duplicate_effects === 0 &&
  r.duplicate_windows === 0 &&
  r.lost_windows === 0 &&
  r.lost_effects === 0 &&
  r.unalerted_unknowns === 0 &&
  r.other_violations === 0 &&
  r.harness_errors.length === 0;

const seconds = (ms: number | null): string => (ms === null ? '–' : (ms / 1000).toFixed(1));

/** Rounds and faults by window path, and the batched backfills (runs before these figures had none). */
function pathLines(r: ChaosResults): string[] {
  if (!r.paths) return [];
  const row = (name: string, p: PathFigures) =>
    `| ${name} | ${p.lanes.join(', ')} | ${p.rounds} | ${p.injected} |`;
  return [
    '## Per window path',
    '',
    '| windows run as | lanes | rounds | faults injected |',
    '|---|---|---|---|',
    row('local activities', r.paths.local),
    row('activity tasks', r.paths.task),
    row('a batch activity', r.paths.batch),
    ...(r.paths.drill ? [row('drill', r.paths.drill)] : []),
    '',
    'Odd lanes run their windows as local activities, even lanes as activity tasks; a round whose work was a',
    'batched backfill (every `crash:inBatch` round, and about a third of those that restart Temporal or PostgreSQL',
    'or terminate its backends) ran its windows in a batch activity, whichever the lane (their follow-up, the',
    "report e-mails, in the windows' own runs).",
    ...(r.paths.drill
      ? [
          "A drill round (a lane's first round of `crash:beforeClaim`, `crash:inHandler`, `crash:afterCommit`,",
          '`temporal-restart`, `pg-terminate` or `pg-restart`, and every third after it) ran a window of the',
          "lane's backup job instead (a local activity): a dump of a source database on the private cluster,",
          "read back, listed, restored into the lane's scratch database, counted and dropped, then published",
          'to a local directory and recorded. Its fault is aimed at the drill: half the `crash:inHandler` ones',
          'kill the worker while it holds the scratch database, the server faults wait until a drill holds it.',
          'The checker then wants one backups row per window, its object once as recorded, the drill recorded',
          'passed once (or the window failed under an alerted incident), no object staged or unnamed, and the',
          'scratch database dropped.',
        ]
      : []),
    '',
  ];
}

/** Per worker life with samples at least a minute apart: first and last RSS and descriptors. */
function resourceLines(r: ChaosResults): string[] {
  const byPid = new Map<number, ChaosResults['resources']>();
  for (const s of r.resources) byPid.set(s.pid, [...(byPid.get(s.pid) ?? []), s]);
  const lives = [...byPid.values()]
    .filter((s) => s.at(-1)!.at - s[0]!.at >= 60_000)
    .sort((a, b) => b.at(-1)!.at - b[0]!.at - (a.at(-1)!.at - a[0]!.at))
    .slice(0, 6);
  if (lives.length === 0) return ['No worker lived a minute between two samples (faults kill them often).'];
  return [
    '| host | pid | lived (min) | samples | RSS first → last (max), MiB | open descriptors first → last (max) |',
    '|---|---|---|---|---|---|',
    ...lives.map((s) => {
      const mib = (kb: number) => (kb / 1024).toFixed(0);
      const maxRss = Math.max(...s.map((x) => x.rssKb));
      const maxFds = Math.max(...s.map((x) => x.fds));
      return `| ${s[0]!.host} | ${s[0]!.pid} | ${((s.at(-1)!.at - s[0]!.at) / 60_000).toFixed(1)} | ${s.length} | ${mib(s[0]!.rssKb)} → ${mib(s.at(-1)!.rssKb)} (${mib(maxRss)}) | ${s[0]!.fds} → ${s.at(-1)!.fds} (${maxFds}) |`;
    }),
  ];
}

export function renderReliability(r: ChaosResults, command: string): string {
  const kindRows = FAULT_KINDS.map((k) => {
    const f = r.kinds[k];
    return `| ${k} | ${f.injected} | ${f.injected_idle} | ${f.rounds} | ${f.duplicate_effects + f.duplicate_windows} | ${f.lost_windows + f.lost_effects} | ${f.unknown_alerted} | ${f.unalerted_unknowns} | ${f.duplicate_alerts} | ${seconds(f.recovery_p50_ms)} | ${seconds(f.recovery_p99_ms)} |`;
  });
  return [
    '# Reliability under injected faults',
    '',
    'Generated by `npm run chaos` (chaos/); do not edit by hand. The figures below are those of the',
    'last run committed with this file; `reliability/results.json` holds the same run in full.',
    '',
    `**${r.faults_injected} faults injected** in ${r.rounds} rounds over ${Math.round(r.duration_s / 60)} minutes:`,
    `**${r.duplicate_effects} duplicate effects, ${r.duplicate_windows} duplicate windows, ${r.lost_windows} lost windows,`,
    `${r.lost_effects} lost effects, ${r.unalerted_unknowns} unalerted unknowns** (other violations: ${r.other_violations}).`,
    '',
    `Run: \`${command}\` (seed ${r.seed}), ${r.started_at}, on ${r.hosts.count} simulated hosts (${r.hosts.note});`,
    `clock skew by ${r.clock_skew_mechanism === 'libfaketime' ? "libfaketime (Debian's `libfaketime`: the whole worker process's wall clock)" : 'the `now` dependency (libfaketime not installed)'}.`,
    `${r.stalled_rounds} rounds took over 5 minutes to settle (slow, not lost: work not settled in 15 minutes counts as lost). ` +
      `${r.windows_checked} windows checked (${r.live_windows} of them the live minutely job's), ${r.worker_lives} worker processes started in all.`,
    '',
    ...pathLines(r),
    '## Per fault kind',
    '',
    '| fault kind | injected | of them met no open work | rounds | duplicates | lost | unknown, alerted | unknown, unalerted | alerts resent in doubt | recovery p50 (s) | recovery p99 (s) |',
    '|---|---|---|---|---|---|---|---|---|---|---|',
    ...kindRows,
    '',
    '## How to read it',
    '',
    '- **injected**: faults that happened (a crash point a worker reached and died at, a server',
    '  killed, a partition made). An armed crash point no worker reached within three minutes is not counted.',
    '- **of them met no open work**: a server fault or partition injected when every window of its',
    '  round was already done and no effect of the lane open: counted, but it tested nothing in flight.',
    '- **duplicates**: a window whose records were applied more than once (its totals above a reference',
    '  summed from the source rows), or an effect its sink received more than once.',
    '- **lost**: a closed window neither done nor under an open incident, or an effect marked done that',
    '  its sink never received, or one left pending.',
    '- **unknown, alerted**: effects whose outcome nobody can know (the worker died between the provider',
    '  call and the done marker, or before the call with its lease passed): recorded `unknown`, never',
    '  guessed, each with an open incident alerted once. **unknown, unalerted** must be 0.',
    '- **alerts resent in doubt**: an alert whose delivery was cut (the process died after the chat',
    '  accepted it, before its done marker) is sent again: a duplicate alert is better than a lost one.',
    '  Telegram offers no idempotency key that would let the second send be refused.',
    '- **recovery**: from the fault until every window of the round is done and every effect settled',
    '  (attempt timeouts are 5 s on the activity-task lanes and 12 s on the local ones, effect leases 3 s; a',
    '  partition counts its own length). A local attempt lost with its worker is run again after the',
    "  workflow task's timeout (10 s).",
    '- The checker (`test/helpers/invariants.ts`) shares no code with the ledger or the effect guard: it',
    '  reads the tables with its own SQL and the recording sinks (a real SMTP server and an HTTP server',
    "  speaking Telegram's Bot API) and compares with a reference computed from the source orders.",
    '',
    '## What runs',
    '',
    '- Three worker hosts, each a network namespace with a veth pair to a bridge in the root namespace,',
    '  where a private PostgreSQL cluster, a Temporal dev server (its own SQLite persistence file), the',
    '  SMTP server and the chat server listen. A worker that dies is started again on its host.',
    '- Lanes (each an hourly sales summary in a year of its own, with a report e-mail per window) run',
    "  rounds side by side: new windows through a tick's catch-up, a backfill (a page a window, so it",
    "  continues as new between pages), a batched backfill (the round's windows in one batch activity),",
    '  a rerun of a done window, or a storm of duplicate starts; one fault of the planned kind is',
    '  injected while that work is in flight. Odd lanes run their windows as local activities (the path',
    '  windows of attempts from 10 s to 10 min take), even lanes as activity tasks.',
    '- A minutely job on the real clock, fired by a real Temporal Schedule, runs through the whole run',
    `  (clock skew acts on it: ${r.live_windows_waited_for_skew} of its window attempts waited for a window a skewed clock saw as still open).`,
    '',
    '## Reproduce',
    '',
    '```',
    'npm run chaos                                  # 500 faults (CHAOS_FAULTS), a random seed',
    `${command}   # this run's plan again`,
    'CHAOS_FAULTS=50 npm run chaos                  # a quicker run',
    'npm run chaos -- --soak 30m                    # continuous faults for 30 minutes, memory sampled',
    '```',
    '',
    "A seed, with the run's fault count and lanes, reproduces each lane's plan: which kinds in which",
    'order and every choice its rounds make (host, offset, duration, restart mode; each lane has its own',
    'generator). How far each lane gets, and how processes interleave on a busy machine, it cannot. Needs root',
    'for the namespaces (without it the hosts are plain processes and a partition is a frozen process;',
    'the output says so). Runs as root in CI; `npm run test:system` runs a 20-fault version (test/system/chaos/chaos.test.ts).',
    '',
    '## Worker resources',
    '',
    ...resourceLines(r),
    '',
    ...(r.harness_errors.length
      ? [
          '## Harness errors (rounds not verified)',
          '',
          ...r.harness_errors.map((e) => `- ${e.split('\n')[0]}`),
          '',
        ]
      : []),
    ...(r.violations.length
      ? ['## Violations', '', ...r.violations.map((v) => `- ${v}`), '']
      : ['## Violations', '', 'None.', '']),
  ].join('\n');
}

/** The steady worker's growth over a soak: median RSS and descriptors early and late in its life. */
function soakLines(r: ChaosResults): string[] {
  const lives = new Map<number, ChaosResults['resources']>();
  for (const x of r.resources) lives.set(x.pid, [...(lives.get(x.pid) ?? []), x]);
  const longest = [...lives.values()].sort((a, b) => b.length - a.length)[0] ?? [];
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
  // The first two minutes are warm-up (code loaded, caches filled); then a fifth at each end.
  const settled = longest.filter((x) => x.at - longest[0]!.at >= 120_000);
  const fifth = Math.max(1, Math.floor(settled.length / 5));
  const early = settled.slice(0, fifth);
  const late = settled.slice(-fifth);
  const minutes = Math.round((r.soak_ms ?? 0) / 60_000);
  const lines = [
    '## Soak',
    '',
    `\`${r.command ?? 'npm run chaos -- --soak'}\` (seed ${r.seed}, ${r.started_at}): ${minutes} minutes of continuous faults, ` +
      `${r.faults_injected} injected, the live minutely job's ${r.live_windows} windows; duplicate effects ${r.duplicate_effects}, ` +
      `duplicate windows ${r.duplicate_windows}, lost windows ${r.lost_windows}, lost effects ${r.lost_effects}, unalerted unknowns ${r.unalerted_unknowns}.`,
    '',
  ];
  if (early.length === 0)
    return [...lines, 'The steady worker lived less than two minutes: no figure for growth.', ''];
  const mib = (kb: number) => (kb / 1024).toFixed(1);
  const rss = [median(early.map((x) => x.rssKb)), median(late.map((x) => x.rssKb))] as const;
  const fds = [median(early.map((x) => x.fds)), median(late.map((x) => x.fds))] as const;
  return [
    ...lines,
    `The steady worker (host ${longest[0]!.host}, never killed, faults all around it) over ` +
      `${((longest.at(-1)!.at - longest[0]!.at) / 60_000).toFixed(0)} minutes, ${longest.length} samples every 10 s, ` +
      'medians of the first and last fifth after two minutes of warm-up:',
    '',
    '| | early | late | late / early | max |',
    '|---|---|---|---|---|',
    `| resident memory (MiB) | ${mib(rss[0])} | ${mib(rss[1])} | ${(rss[1] / rss[0]).toFixed(2)} | ${mib(Math.max(...longest.map((x) => x.rssKb)))} |`,
    `| open descriptors | ${fds[0]} | ${fds[1]} | ${(fds[1] / Math.max(1, fds[0])).toFixed(2)} | ${Math.max(...longest.map((x) => x.fds))} |`,
    '',
  ];
}

async function readResults(path: string): Promise<ChaosResults | null> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as ChaosResults;
  } catch {
    return null;
  }
}

/**
 * Writes the run's JSON (a fault run's reliability/results.json, a soak's reliability/soak.json)
 * and renders RELIABILITY.md from the latest of each.
 */
export async function writeReports(r: ChaosResults | null, root: string): Promise<void> {
  const dir = join(root, 'reliability');
  await mkdir(dir, { recursive: true });
  if (r)
    await writeFile(join(dir, r.soak_ms ? 'soak.json' : 'results.json'), `${JSON.stringify(r, null, 2)}\n`);
  const faults = await readResults(join(dir, 'results.json'));
  const soak = await readResults(join(dir, 'soak.json'));
  const text = faults
    ? renderReliability(faults, faults.command ?? `CHAOS_SEED=${faults.seed} npm run chaos`)
    : '# Reliability under injected faults\n\nNo fault run yet: `npm run chaos`.\n';
  await writeFile(join(root, 'RELIABILITY.md'), soak ? `${text}\n${soakLines(soak).join('\n')}` : text);
}
