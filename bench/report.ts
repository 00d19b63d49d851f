// BENCHMARKS.md from one run's figures: the table, the goals met or not, what each figure is.
import type { Figure } from './figures.js';

interface Goal {
  figure: string;
  /** What is compared with the bound: the ratio, or the value itself. */
  on: 'ratio' | 'value';
  at: 'least' | 'most';
  bound: number;
  text: string;
}

const GOALS: readonly Goal[] = [
  {
    figure: 'ingest.vs_plain@1000',
    on: 'ratio',
    at: 'least',
    bound: 1,
    text: 'ingest >= 1.0x a plain multi-row INSERT',
  },
  {
    figure: 'ingest.vs_copy@1000',
    on: 'ratio',
    at: 'least',
    bound: 0.6,
    text: 'ingest >= 0.6x COPY with no guarantee',
  },
  {
    figure: 'ledger.fixed_ms',
    on: 'value',
    at: 'most',
    bound: 1,
    text: "the ledger's fixed cost <= 1 ms a window",
  },
  {
    figure: 'summary.vs_plain',
    on: 'ratio',
    at: 'least',
    bound: 0.6,
    text: 'the sales summary >= 0.6x its bare statement',
  },
  {
    figure: 'backfill.batched_seconds@8760',
    on: 'value',
    at: 'most',
    bound: 30,
    text: '8,760 windows batched in <= 30 s',
  },
  {
    figure: 'backfill.per_window_vs_bare',
    on: 'ratio',
    at: 'least',
    bound: 0.8,
    text: 'per-window backfill >= 0.8x bare Temporal',
  },
  {
    figure: 'peers.graphile_worker.throughput_ratio',
    on: 'ratio',
    at: 'least',
    bound: 1,
    text: 'tidemark batched >= 1.0x graphile-worker with a careful handler',
  },
  {
    figure: 'peers.pg_boss.throughput_ratio',
    on: 'ratio',
    at: 'least',
    bound: 1,
    text: 'tidemark batched >= 1.0x pg-boss with a careful handler',
  },
  {
    figure: 'worker.rss_mb',
    on: 'value',
    at: 'most',
    bound: 250,
    text: "the worker's resident memory after both 8,760-window backfills <= 250 MiB",
  },
  {
    figure: 'tidemark.double_applied',
    on: 'value',
    at: 'most',
    bound: 0,
    text: 'no window applied twice when the worker is killed',
  },
  {
    figure: 'tidemark.lost',
    on: 'value',
    at: 'most',
    bound: 0,
    text: 'no window lost when the worker is killed',
  },
  {
    figure: 'jobs.first_paint_ms@1000',
    on: 'value',
    at: 'most',
    bound: 1000,
    text: "the overview's first paint at 1,000 jobs <= 1 s",
  },
  {
    figure: 'jobs.temporal_cpu_on_viewers_pct@1000',
    on: 'value',
    at: 'most',
    bound: 10,
    text: 'five viewers of 1,000 jobs cost the Temporal server < 10% of a core',
  },
  {
    figure: 'jobs.window_after_tick_max_s@1000',
    on: 'value',
    at: 'most',
    bound: 60,
    text: 'every window of 1,000 five-minute jobs done within 60 s of its tick',
  },
  {
    figure: 'jobs.window_after_tick_not_done@1000',
    on: 'value',
    at: 'most',
    bound: 0,
    text: 'no window of 1,000 five-minute jobs left undone',
  },
];

const fmt = (v: number) =>
  Number.isInteger(v)
    ? String(v)
    : Math.abs(v) >= 100
      ? v.toFixed(0)
      : Math.abs(v) >= 1
        ? v.toFixed(2)
        : v.toFixed(3);

function goalLine(g: Goal, f: Figure | undefined): string {
  if (!f) return `- ${g.text}: not measured in this run`;
  const v = g.on === 'ratio' ? f.ratio : f.value;
  if (v === null) return `- ${g.text}: not measured in this run`;
  const met = g.at === 'least' ? v >= g.bound : v <= g.bound;
  const shown = g.on === 'ratio' ? `${v.toFixed(2)}x` : `${fmt(v)} ${f.unit}`;
  return `- ${met ? '**met**' : '**not met**'}: ${g.text} (\`${g.figure}\` = ${shown})`;
}

/** What bounds each goal not met, from this run's own figures. */
function bounds(byName: ReadonlyMap<string, Figure>): string[] {
  const v = (name: string) => byName.get(name)?.value;
  const r = (name: string) => byName.get(name)?.ratio ?? null;
  const lines: string[] = [];
  const fixed = v('ledger.fixed_ms');
  const statement = v('ledger.statement_ms');
  const copy = v('ingest.copy@1000');
  const insert = v('ingest.plain_insert@1000');
  if (fixed !== undefined && copy && insert && (r('ingest.vs_plain@1000') ?? 1) < 1) {
    const copyMs = 1000_000 / copy;
    const insertMs = 1000_000 / insert;
    lines.push(
      `- **ingest at 1,000 records a window**: COPY lands a window's rows in ${fmt(copyMs)} ms and the multi-row INSERT in ` +
        `${fmt(insertMs)} ms (the table and its primary-key index cost both about the same per row at this size); the ledger ` +
        `adds ${fmt(fixed)} ms a window, so the guarded COPY can reach at most ${(insertMs / (copyMs + fixed)).toFixed(2)}x the INSERT. ` +
        `With more records a window the fixed cost matters less: at 5,000 the guarded COPY is ${r('ingest.vs_plain@5000')?.toFixed(2)}x ` +
        `the INSERT, at 20,000 ${r('ingest.vs_plain@20000')?.toFixed(2)}x.`,
    );
  }
  if (fixed !== undefined && fixed > 1 && statement !== undefined) {
    lines.push(
      `- **the ledger's fixed cost**: ${fmt(fixed)} ms, of which the claim's round trip (it carries the BEGIN) ${fmt(v('ledger.claim_ms') ?? 0)} ms ` +
        `and the finish's (the server function, carrying the COMMIT and its flush) ${fmt(v('ledger.finish_ms') ?? 0)} ms, less the ${fmt(statement)} ms ` +
        `the statement alone pays for its own round trip and flush; ${fmt(v('ledger.other_ms') ?? 0)} ms is the activity's own code, kysely and the ` +
        "driver. Both are server functions whose plans the session keeps, and the handler's statements are prepared once per " +
        'connection; two round trips is the floor with node-postgres, which sends one statement at a time and cannot pipeline; ' +
        'what is left is the work of the finish (the run record, the counts, the watermark row) and the code around it.',
    );
  }
  const summary = byName.get('summary.plain_statement');
  if (summary && fixed !== undefined && (r('summary.vs_plain') ?? 1) < 0.6) {
    const ms = 2000_000 / summary.value;
    lines.push(
      `- **the sales summary**: its statement alone sums a window's 2,000 orders in ${fmt(ms)} ms; the job's handler also records the ` +
        `window's contribution for reruns and looks for bad orders (one statement, its plan kept per connection), and the ledger adds ` +
        `${fmt(fixed)} ms: at that statement's size the ledger alone allows at most ${(ms / (ms + fixed)).toFixed(2)}x.`,
    );
  }
  if ((r('backfill.per_window_vs_bare') ?? 1) < 0.8) {
    const cpu = r('backfill.per_window_cpu_ms');
    const measured =
      cpu !== null
        ? ` Both rates are bound by the two cores: a window child cost ${fmt(v('backfill.per_window_cpu_ms') ?? 0)} ms of the ` +
          `machine's CPU (the worker process ${fmt(v('backfill.per_window_worker_cpu_ms') ?? 0)} ms of it) against a bare child's ` +
          `${fmt(v('backfill.bare_cpu_ms') ?? 0)} ms (${fmt(v('backfill.bare_worker_cpu_ms') ?? 0)} ms), ${cpu.toFixed(2)}x, so the ` +
          `per-window rate can reach about ${(1 / cpu).toFixed(2)}x the bare one.`
        : '';
    lines.push(
      '- **per-window backfill**: a window child runs the ledger transaction (a local activity) and the sales summary in ' +
        "its workflow task, a second workflow activation for the local activity's result, and a history of 6 events against " +
        "a bare child's 5 (no patch marker: the starter's revision says the shape); a bare child runs none of it." +
        measured,
    );
  }
  const rss = byName.get('worker.rss_mb');
  const start = v('worker.rss_start_mb');
  if (rss && rss.value > 250 && start !== undefined) {
    lines.push(
      `- **the worker's memory**: ${fmt(rss.value)} MiB after both backfills, of which ${fmt(start)} MiB before any window ` +
        "(the floor: Node.js and the modules it loaded, the SDK's core, its workflow thread holding the bundle built " +
        `ahead); the backfills add ${fmt(rss.value - start)} MiB, and the main thread's heap ends at ` +
        `${fmt(v('worker.heap_used_mb') ?? 0)} MiB used of ${fmt(v('worker.heap_total_mb') ?? 0)}.`,
    );
  }
  const careful = ['graphile_worker', 'pg_boss']
    .map((p) => byName.get(`peers.${p}.throughput_ratio`))
    .filter((f): f is Figure => !!f && f.ratio !== null && f.ratio < 1);
  if (careful.length > 0) {
    const peerRate = Math.max(...careful.map((f) => byName.get(f.baseline!)?.value ?? 0));
    lines.push(
      `- **batched backfill against a careful peer**: tidemark ${fmt(careful[0]!.value)} windows/s, the peers up to ` +
        `${fmt(peerRate)}. A careful peer's window is one statement (its marker, the sums, the day row) whose ` +
        'queue bookkeeping is batched (graphile-worker fetches and completes jobs by the hundred, pg-boss by the ' +
        "batch); tidemark's is three round trips, each its own statement (the claim with its BEGIN, the handler's " +
        'statement, the finish with its COMMIT), and the finish also writes the run record and the counts and moves ' +
        'the watermark under its lock, for every window, with the worker and PostgreSQL sharing the two cores. ' +
        'What would close it: the windows of a batch in one transaction, their claims in one statement before ' +
        'the handlers and their finishes in one after, about one round trip a window.',
    );
  }
  const batched = byName.get('backfill.batched_seconds@8760');
  if (batched && batched.value > 30) {
    lines.push(
      `- **batched backfill**: ${fmt(batched.value)} s; each of the 8,760 windows is still its own transaction with its done marker, ` +
        'counts, run record and watermark (the fixed cost above), eight batches at once on two cores shared with PostgreSQL.',
    );
  }
  return lines.length > 0 ? ['### What bounds the goals not met', '', ...lines, ''] : [];
}

export function markdown(
  results: readonly Figure[],
  seconds: number,
  killNotes: readonly string[] = [],
  date = new Date().toISOString(),
): string {
  const byName = new Map(results.map((r) => [r.name, r]));
  const row = (r: Figure) =>
    `| ${r.name} | ${fmt(r.value)} ${r.unit} | ${r.baseline ?? '—'} | ${r.ratio === null ? '—' : `${r.ratio.toFixed(2)}x`} |`;
  return [
    '# Benchmarks',
    '',
    `Measured by \`npm run bench\` on ${date.slice(0, 10)} in ${seconds} s, one run, one machine (2 cores),`,
    'the same PostgreSQL 15 (fsync and synchronous_commit on) and Temporal dev server for every figure. Each ratio is',
    'to a baseline measured in the same run; where a variant ran three times, interleaved with its baseline, the median counts.',
    '',
    '## Goals',
    '',
    ...GOALS.map((g) => goalLine(g, byName.get(g.figure))),
    '',
    ...bounds(byName),
    '## Figures',
    '',
    '| figure | value | baseline | ratio |',
    '|---|---|---|---|',
    ...results.map(row),
    '',
    '## What each figure is',
    '',
    '- `ingest.*`: landing source records (rows in memory, as a source system hands them over) in a table, in windows of',
    '  1,000 / 5,000 / 20,000 records. `plain_insert@N` is one multi-row INSERT per window (the rows as three array',
    '  parameters), autocommit, no marker; `copy@N` is one COPY per window, autocommit, no marker: the ceilings, with no',
    '  guarantee. `vs_plain@N` and `vs_copy@N` are the real window activity whose handler lands the same rows with',
    "  `ctx.copyRows` (COPY inside the window's transaction), with its done marker, counts, run record and watermark.",
    '  `insert_path_vs_plain@N` is the activity around the multi-row INSERT instead. `naive_per_record_tx` is one',
    '  transaction per record with a per-record processed key.',
    '- `summary.*`: the sales-summary job (orders summed per day, one set-based statement per window, 2,000 orders a',
    "  window). `plain_statement` is that statement alone, autocommit; `vs_plain` the real activity with the job's",
    '  handler, which also records its per-window contribution (for reruns) and checks for bad orders.',
    '- `ledger.*`: the activity with a one-row INSERT for handler, against that INSERT alone (`statement_ms`, autocommit).',
    '  `fixed_ms` is the difference: what the guarantee adds to a window. `begin_ms`, `claim_ms`, `finish_ms`,',
    "  `commit_ms` are the round trips of the ledger's statements as sent (the claim carries the BEGIN and the finish",
    "  the COMMIT, so the first and last are 0 when nothing else is sent); `other_ms` is the rest: the activity's own",
    "  code, kysely and the driver. The commit's flush is paid by the statement alone too, so it is not in `fixed_ms`.",
    '- `backfill.*`: `bare_child_workflows` is trivial child workflows started and completed by a parent with the same',
    '  concurrency: the orchestration ceiling on this server. `per_window_vs_bare` is the backfill workflow over the same',
    '  number of hourly windows, each a window child workflow running the real activity against PostgreSQL.',
    '  `batched_seconds@N` is `tidemark backfill --batch` over the same windows (200 consecutive windows per activity, 8',
    '  activities at once, each window still its own transaction with its own done marker and run record), against the',
    '  per-window backfill in seconds. Every backfill runs over the same orders as the peers (3 a window).',
    '- `worker.*`: the backfills run in a process of their own, started with the flags the image gives a worker',
    '  (workers/memory.ts: `--max-old-space-size=256 --max-semi-space-size=1`, `MALLOC_ARENA_MAX=2`); that process is',
    '  the worker (workflows and activities run in it), running compiled JavaScript as the package does',
    '  (tsconfig.bench.json; under tsx, BENCH_WORKER_TSX=1, it holds ~25 MiB more). `rss_start_mb` is its resident',
    '  memory once the worker is created (modules loaded, the workflow bundle built, connections open), before any',
    '  window; `rss_mb` after both 8,760-window backfills, against it. `heap_used_mb` and `heap_total_mb` are the main',
    "  thread's V8 heap at the end (the SDK's workflow thread has a heap of its own, inside the RSS).",
    '- `peers.*`: graphile-worker 0.18.0 and pg-boss 12.38.1 (their current releases) running the same hourly summary',
    '  over the same windows and orders, one job per window deduplicated by `jobKey` / `singletonKey`, with their',
    '  documented throughput settings (bench/peers/). Each job is handled the careful way their docs lead to: a done',
    '  marker keyed by the window in the same transaction as the summary, which runs only when the marker is new;',
    "  written the fastest way, as the first step of the summary's own statement (`insert ... on conflict do nothing",
    '  returning 1`, the sums gated on it): one round trip, as many as the naive handler. `windows_per_s` is that, from',
    '  enqueueing to all done; `naive_windows_per_s` the statement alone (no marker). `throughput_ratio` is tidemark',
    '  batched against the careful peer, `per_window_ratio` tidemark with a workflow per window.',
    "- `*.double_applied`, `*.lost`: each system's worker, in a child process, SIGKILLed in the middle of 100 windows",
    '  (each kill right after a commit is seen, five of them), restarted each time; then windows whose totals were',
    '  applied twice, or never, against the orders; `peers.*.naive.*` with the naive handler. Each lost window is',
    "  explained by its job's state in the peer's own table (Kill tests below). pg-boss's lost windows are jobs that",
    '  were in the batch each killed worker had fetched (up to `batchSize`, here every window left): a kill leaves the',
    '  batch active until it expires, and each expiry spends one of its retries, so the windows no worker finished',
    '  before the fifth kill fail for good (`retryLimit` 4: 5 attempts) and are never run again unless a person sends',
    '  them again; the careful handler cannot help there.',
    "- `scale.*`: the product's hot operations (bench/scale-operations.ts, each calling the real function) timed on a ledger",
    '  of the last day alone (`*_day_ms`, the baseline: what each shows is there in both) and on three years of',
    '  history (`*_ms`, median of 21 after a warm-up). The',
    '  seed (generate_series, `seed_s`): a minutely job (1,576,800 windows) and two hourly ones (26,280 each), every',
    '  window done with a tick run record and a window run record (every 10,000th failed once first), an e-mail effect',
    '  with one attempt per hourly window (the last three unknown), a closed incident a day per job, a quarantined',
    '  record every 1,000 minutes; secondary indexes built after the rows, then VACUUM ANALYZE. `tick_plan` plans the',
    "  minutely job's tick; `window_commit` claims and finishes its next window; `overview` is the jobs overview",
    "  (schedule, watermark, last run); `overview_health` the page's health counts (kept counts, job_window_counts);",
    '  `recent_windows` is `tidemark status`; `cli_runs` `tidemark runs`; `durations` the sparkline;',
    "  `grid` a day of the minutely job, `grid_week` an hourly job's default week; `backfill_dry_run` a day of the",
    '  minutely job; `window_detail`, `window_effects`, `effects_in_doubt`, `incidents_open` as the page shows them;',
    '  `metrics_scrape` the /metrics PostgreSQL gauges (effects by state from kept counts, effect_counts);',
    "  `alert_window_attempts` the window's attempts an alert's raise reads (by the primary key its key names).",
    '  test/system/bench/scale.test.ts checks the same statements under EXPLAIN (plans and shared buffers).',
    '- `size.*`: bench/ledger-size.ts (`node --import tsx bench/ledger-size.ts`): three years of one minutely job',
    '  (1,576,800 done windows, a window and a tick run record each), the database size after VACUUM FULL as seeded and',
    '  after one window of the built-in housekeeping job (its batched deletions and the folding of done markers older',
    '  than 90 days into spans, default retentions); `bytes_per_done_window` is job_windows plus job_done_spans (table',
    '  and indexes) over the done windows.',
    '- `jobs.*`: bench/jobs.ts (`npx tsx bench/jobs.ts [costs|ticks]`, merged into this file): N five-minute jobs',
    '  (N = 10, 100, 1,000), each N on a Temporal dev server and a database of its own; the baseline of each `@N` is the',
    '  same figure `@10`. `sync_ms` is `schedules sync` creating every schedule (16 at a time); `overview_reading_ms` one',
    "  reading of the page's overview (one listing of the schedules, a few statements for all jobs), median of 7;",
    '  `cli_jobs_ms` `tidemark jobs` (each schedule described, 16 at a time, so a pause just made shows); `metrics_scrape_ms`',
    "  a /metrics scrape (a line per job); `temporal_cpu_idle_pct` the Temporal server's share of a core over a span with",
    '  the schedules paused and no page open, `temporal_cpu_5_viewers_pct` the same with five update streams open,',
    '  `temporal_cpu_on_viewers_pct` the difference; `stream_bytes_per_minute` what one stream is sent a minute after its',
    '  first whole state (only the jobs whose rows changed); `first_paint_ms` from opening the page in Chromium to the list',
    '  holding the last job, with nobody else watching (the server reads afresh), median of 7. `window_after_tick_*`:',
    '  the jobs on their real schedules and one worker (in the bench process) for one tick each: seconds from a',
    "  window's tick (its end plus the job's tick offset) to its done marker, p50, p99 and the slowest; `late_over_60s`",
    '  and `not_done` count windows; `unspread_*` is the same run with every tick at the lateness (`spreadTicks: false`),',
    "  the baseline of the spread ticks; `ticks_temporal_cpu_*pct` the Temporal server's share of a core over the run.",
    '- `restore.*`: bench/restore.ts (`node --import tsx bench/restore.ts`): a 1,500,000-row table backed up by the',
    '  real job (encrypted, to a directory), then three times, interleaved, medians: `checked_s` is `tidemark backups',
    '  restore` into a new database (size, SHA-256 and GCM tag checked while streaming, pg_restore in one transaction,',
    '  row counts compared) against `pg_restore --single-transaction` of the plain dump file into a database created',
    '  just before (`pg_restore_s`, no check); `verify_s` is `tidemark backups verify` (the same stream into',
    '  `pg_restore --list`) against `sha256sum` of the plain file and `pg_restore --list` of it (`manual_verify_s`).',
    '',
    ...(killNotes.length > 0 ? ['## Kill tests', '', ...killNotes.map((n) => `- ${n}`), ''] : []),
  ].join('\n');
}
