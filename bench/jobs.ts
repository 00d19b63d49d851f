// Many jobs: what the page, the CLI, /metrics and `schedules sync` cost at 10, 100 and 1,000
// five-minute jobs, each on a Temporal dev server and a database of its own. `jobs.<op>@<N>` is the
// median over the repetitions, its baseline the same at 10 jobs (the ratio is what the jobs add).
// `jobs.temporal_cpu_5_viewers_pct@N` is the share of a core the Temporal server spends while five
// update streams are open, against the same span with none open. Run alone with
// `npx tsx bench/jobs.ts [costs|ticks]` (BENCH_QUICK=1: 10 and 100 jobs, printed only); without
// BENCH_QUICK the figures are merged into bench/results.json (then `npm run bench -- --render`).
import { readFileSync, readlinkSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { loadConfig } from '../config/env.js';
import { defineCatalog } from '../schedules/define.js';
import { jobsOverview, listSchedules } from '../operator/overview.js';
import { overviewRows } from '../operator/job-health.js';
import { createMetrics } from '../workers/metrics.js';
import { syncSchedules } from '../workers/schedule-sync.js';
import { startWebServer } from '../web/server.js';
import { SCHEDULES_LISTED_MS } from '../web/overview-schedules.js';
import { createTestDb } from '../test/helpers/db.js';
import { salesJob } from '../test/helpers/jobs.js';
import { postLogin, sessionCookie } from '../test/helpers/web.js';
import { launchBrowser, loggedInPage } from '../test/helpers/browser.js';
import { memoryLogger } from '../activities/logger.js';
import { createWorker } from '../workers/create-worker.js';
import { benchServer, figure, log, QUICK, sizeFrom, type Figure } from './figures.js';
import { benchBundle, percentile } from './latency.js';

/** BENCH_JOBS_SIZES="10,100,1000" (the default; BENCH_QUICK: 10 and 100). */
function jobSizes(): number[] {
  const raw = process.env.BENCH_JOBS_SIZES;
  if (!raw) return QUICK ? [10, 100] : [10, 100, 1_000];
  const sizes = raw.split(',').map(Number);
  if (!sizes.every((n) => Number.isSafeInteger(n) && n > 0))
    throw new Error(`BENCH_JOBS_SIZES="${raw}" must be whole numbers separated by commas`);
  return sizes;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function timed(reps: number, fn: () => Promise<unknown>): Promise<number> {
  await fn(); // warm
  const ms: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await fn();
    ms.push(performance.now() - t);
  }
  return median(ms);
}

/** The pid of the process listening on `port` (the dev server), from /proc. */
async function pidOnPort(port: number): Promise<number> {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set(
    ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .slice(1)
        .map((l) => l.trim().split(/\s+/))
        .filter((c) => c[1]?.endsWith(`:${hex}`) && c[3] === '0A')
        .map((c) => c[9]!),
    ),
  );
  for (const pid of await readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      for (const fd of await readdir(`/proc/${pid}/fd`)) {
        const m = /socket:\[(\d+)\]/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1]!)) return Number(pid);
      }
    } catch {
      // A process gone or not ours to read.
    }
  }
  throw new Error(`no process listens on port ${port}`);
}

/** CPU seconds (user + system) the process has used. */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** The share of a core `pid` used over `ms`. */
async function cpuShare(pid: number, ms: number): Promise<number> {
  const before = cpuSeconds(pid);
  const t = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return ((cpuSeconds(pid) - before) / ((performance.now() - t) / 1000)) * 100;
}

interface AtN {
  sync: number;
  overview: number;
  cli: number;
  metrics: number;
  cpuIdle: number;
  cpuViewers: number;
  bytesPerMinute: number;
  firstPaint: number;
}

/**
 * Milliseconds from opening the page (signed in already) to the list holding the catalog's last
 * job, in Chromium, with nobody else watching (the server reads the overview afresh): the median.
 */
async function paintTimes(url: string, token: string, last: string, reps: number): Promise<number> {
  const browser = await launchBrowser();
  try {
    const { page } = await loggedInPage(browser, url, token);
    await page.locator(`tr[data-job="${last}"]`).waitFor({ timeout: 60_000 });
    const ms: number[] = [];
    for (let i = 0; i < reps; i++) {
      await page.goto('about:blank');
      // The page's stream gone, the server's reader stops at its next turn, and its listing of the
      // schedules ages out: the next view is read afresh, as by the first person in the morning.
      await new Promise((r) => setTimeout(r, SCHEDULES_LISTED_MS + 1_000));
      const t = performance.now();
      await page.goto(url);
      await page.locator(`tr[data-job="${last}"]`).waitFor({ timeout: 60_000 });
      ms.push(performance.now() - t);
    }
    return median(ms);
  } finally {
    await browser.close();
  }
}

async function atN(n: number, reps: number, cpuMs: number): Promise<AtN> {
  const env = await benchServer();
  const t = await createTestDb();
  const catalog = defineCatalog(
    Array.from({ length: n }, (_, i) =>
      salesJob(`shop-${String(i).padStart(4, '0')}`, {
        grid: '5m',
        lateness: '1m',
        start: '2026-12-01T00:00:00Z',
      }),
    ),
  );
  const client = env.client;
  try {
    const taskQueue = `bench-jobs-${n}`;
    const s0 = performance.now();
    await syncSchedules(client, catalog, { taskQueue, apply: true });
    const sync = performance.now() - s0;
    log(`jobs@${n}: sync ${Math.round(sync)} ms`);
    // Nothing runs the schedules' ticks: paused, so the server's own work is the readings'.
    await Promise.all(
      catalog.jobs.map((j) =>
        client.schedule
          .getHandle(`tidemark:${j.name}`)
          .pause('bench')
          .catch(() => undefined),
      ),
    );
    const names = catalog.jobs.map((j) => j.name);
    const now = () => new Date();
    const overview = await timed(reps, async () =>
      overviewRows(t.db, client, catalog, now(), { schedules: await listSchedules(client, names) }),
    );
    const cli = await timed(Math.max(1, Math.floor(reps / 3)), () =>
      jobsOverview(t.db, client, catalog, now()),
    );
    const metrics = await timed(reps, () =>
      createMetrics({ db: t.db, catalog, client, taskQueues: [taskQueue] }).registry.metrics(),
    );
    log(
      `jobs@${n}: overview ${overview.toFixed(1)} ms, cli ${cli.toFixed(1)} ms, metrics ${metrics.toFixed(1)} ms`,
    );

    const pid = await pidOnPort(Number(env.address.split(':').pop()));
    const cpuIdle = await cpuShare(pid, cpuMs);
    const config = loadConfig({
      ...process.env,
      DATABASE_URL: t.url,
      TEMPORAL_ADDRESS: env.address,
      TEMPORAL_NAMESPACE: env.namespace ?? 'default',
    });
    const token = 'bench-jobs-token-0123456789';
    const web = await startWebServer({ port: 0, token, db: t.db, client, catalog, config });
    const stop = new AbortController();
    let bytes = 0;
    try {
      const cookie = sessionCookie(await postLogin(web.url, token));
      const streams = await Promise.all(
        [0, 1, 2, 3, 4].map(async () => {
          const r = await fetch(`${web.url}/api/events`, { headers: { cookie }, signal: stop.signal });
          const reader = r.body!.getReader();
          // The whole state first (it may come in several chunks): what follows is the changes.
          let text = '';
          while (!text.includes('\n\n')) {
            const c = await reader.read();
            if (c.done) break;
            text += Buffer.from(c.value).toString();
          }
          const first = text.indexOf('\n\n') + 2;
          bytes += Buffer.byteLength(text.slice(first));
          return { reader, first };
        }),
      );
      // Reading (and counting) what every stream is sent while the server's share is measured.
      const counting = streams.map(async ({ reader }) => {
        for (;;) {
          const c = await reader.read().catch(() => ({ done: true, value: undefined }));
          if (c.done) return;
          bytes += c.value?.length ?? 0;
        }
      });
      const cpuViewers = await cpuShare(pid, cpuMs);
      const bytesPerMinute = (bytes / 5 / (cpuMs / 1000)) * 60;
      stop.abort();
      await Promise.allSettled(counting);
      const firstPaint = await paintTimes(web.url, token, catalog.jobs.at(-1)!.name, reps);
      log(
        `jobs@${n}: Temporal ${cpuIdle.toFixed(1)}% of a core idle, ${cpuViewers.toFixed(1)}% with five viewers; ${Math.round(bytesPerMinute)} bytes a minute a viewer after the first ${streams[0]!.first}`,
      );
      log(`jobs@${n}: first paint ${Math.round(firstPaint)} ms (nobody else watching)`);
      return { sync, overview, cli, metrics, cpuIdle, cpuViewers, bytesPerMinute, firstPaint };
    } finally {
      stop.abort();
      await web.stop();
    }
  } finally {
    await t.drop().catch(() => undefined);
    await env.teardown();
  }
}

export async function jobsFigures(): Promise<Figure[]> {
  const sizes = jobSizes();
  const reps = sizeFrom('BENCH_JOBS_REPS', 7, 3);
  const cpuMs = sizeFrom('BENCH_JOBS_CPU_MS', 60_000, 10_000);
  const at = new Map<number, AtN>();
  for (const n of sizes) at.set(n, await atN(n, reps, cpuMs));
  const smallest = sizes[0]!;
  const base = at.get(smallest)!;
  const out: Figure[] = [];
  for (const [n, r] of at) {
    const vs = (name: string, value: number) =>
      n === smallest ? undefined : { name: `jobs.${name}@${smallest}`, value };
    out.push(
      figure(`jobs.sync_ms@${n}`, r.sync, 'ms', vs('sync_ms', base.sync)),
      figure(`jobs.overview_reading_ms@${n}`, r.overview, 'ms', vs('overview_reading_ms', base.overview)),
      figure(`jobs.cli_jobs_ms@${n}`, r.cli, 'ms', vs('cli_jobs_ms', base.cli)),
      figure(`jobs.metrics_scrape_ms@${n}`, r.metrics, 'ms', vs('metrics_scrape_ms', base.metrics)),
      figure(`jobs.temporal_cpu_idle_pct@${n}`, r.cpuIdle, '% of a core'),
      figure(`jobs.temporal_cpu_5_viewers_pct@${n}`, r.cpuViewers, '% of a core', {
        name: `jobs.temporal_cpu_idle_pct@${n}`,
        value: Math.max(r.cpuIdle, 0.1),
      }),
      figure(`jobs.temporal_cpu_on_viewers_pct@${n}`, Math.max(0, r.cpuViewers - r.cpuIdle), '% of a core'),
      figure(`jobs.first_paint_ms@${n}`, r.firstPaint, 'ms', vs('first_paint_ms', base.firstPaint)),
      figure(`jobs.stream_bytes_per_minute@${n}`, r.bytesPerMinute, 'bytes'),
    );
  }
  return out;
}

interface TickRun {
  /** Seconds from each window's tick (its end plus the job's tick offset) to its done marker. */
  delays: number[];
  /** Seconds from each window's close (its end plus the lateness) to its done marker. */
  afterClose: number[];
  expected: number;
  /** Share of a core the Temporal server used over the run. */
  temporalCpu: number;
  /** The bench process's RSS at the end (the worker runs in it), MiB. */
  rssMb: number;
}

/**
 * N five-minute jobs on their real schedules and one worker, for `cycles` ticks each: how long after
 * its tick each window is done. `spread` false keeps every tick at the lateness (the baseline).
 */
async function tickRun(n: number, cycles: number, spread: boolean): Promise<TickRun> {
  const env = await benchServer();
  const t = await createTestDb();
  const FIVE = 300_000;
  const first = Math.floor(Date.now() / FIVE) * FIVE;
  const catalog = defineCatalog(
    Array.from({ length: n }, (_, i) =>
      salesJob(`shop-${String(i).padStart(4, '0')}`, {
        grid: '5m',
        lateness: '1m',
        start: new Date(first).toISOString(),
      }),
    ),
    { spreadTicks: spread },
  );
  const taskQueue = `bench-ticks-${n}`;
  const pid = await pidOnPort(Number(env.address.split(':').pop()));
  const worker = await createWorker({
    connection: env.nativeConnection,
    namespace: env.namespace ?? 'default',
    taskQueue,
    deps: { db: t.db, catalog, logger: memoryLogger(), now: () => new Date() },
    bundle: await benchBundle(),
  });
  const expected = n * cycles;
  const lastEnd = first + cycles * FIVE;
  try {
    let cpu = 0;
    let t0 = 0;
    await worker.runUntil(async () => {
      await syncSchedules(env.client, catalog, { taskQueue, apply: true });
      const cpu0 = cpuSeconds(pid);
      t0 = performance.now();
      // Every window up to the cycles' end done, or two minutes past its last tick.
      const deadline = lastEnd + 60_000 + 60_000 + 120_000;
      for (;;) {
        const done = await t.db
          .selectFrom('job_windows')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('status', '=', 'done')
          .where('window_end', '<=', new Date(lastEnd))
          .executeTakeFirstOrThrow();
        if (Number(done.n) >= expected || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 2_000));
      }
      cpu = ((cpuSeconds(pid) - cpu0) / ((performance.now() - t0) / 1000)) * 100;
      await Promise.all(
        catalog.jobs.map((j) =>
          env.client.schedule
            .getHandle(`tidemark:${j.name}`)
            .delete()
            .catch(() => undefined),
        ),
      );
    });
    const rows = await t.db
      .selectFrom('job_windows')
      .select(['job', 'window_end', 'finished_at'])
      .where('status', '=', 'done')
      .where('window_end', '<=', new Date(lastEnd))
      .execute();
    const delays = rows.map((r) => {
      const tick = catalog.get(r.job).tick;
      const offset = tick.kind === 'interval' ? tick.offsetMs : 0;
      return (new Date(r.finished_at!).getTime() - (r.window_end.getTime() + offset)) / 1000;
    });
    // From the window's close (its end plus the lateness): what the spread of the ticks adds too.
    const afterClose = rows.map(
      (r) =>
        (new Date(r.finished_at!).getTime() - (r.window_end.getTime() + catalog.get(r.job).latenessMs)) /
        1000,
    );
    return { delays, afterClose, expected, temporalCpu: cpu, rssMb: process.memoryUsage().rss / 1024 / 1024 };
  } finally {
    await t.drop().catch(() => undefined);
    await env.teardown();
  }
}

/**
 * `jobs.window_after_tick_*_s@N`: seconds from a window's tick to its done marker (p50, p99, the
 * slowest), windows late (over 60 s) and never done, with the ticks spread as the catalog spreads
 * them; at the largest N also with every tick at its lateness, the baseline.
 */
export async function tickFigures(): Promise<Figure[]> {
  const sizes = jobSizes();
  const cycles = sizeFrom('BENCH_TICK_CYCLES', 2, 1);
  const out: Figure[] = [];
  const add = (n: number, label: string, r: TickRun, vs?: TickRun) => {
    const p = (q: number, xs: number[]) => percentile(xs, q);
    const name = (what: string) => `jobs.window_after_tick_${label}${what}@${n}`;
    out.push(
      figure(
        name('p50_s'),
        p(50, r.delays),
        's',
        vs && { name: name('p50_s').replace(label, 'unspread_'), value: p(50, vs.delays) },
      ),
      figure(
        name('p99_s'),
        p(99, r.delays),
        's',
        vs && { name: name('p99_s').replace(label, 'unspread_'), value: p(99, vs.delays) },
      ),
      figure(
        name('max_s'),
        Math.max(...r.delays),
        's',
        vs && { name: name('max_s').replace(label, 'unspread_'), value: Math.max(...vs.delays) },
      ),
      figure(`jobs.window_after_close_${label}p50_s@${n}`, p(50, r.afterClose), 's'),
      figure(`jobs.window_after_close_${label}max_s@${n}`, Math.max(...r.afterClose), 's'),
      figure(name('late_over_60s'), r.delays.filter((d) => d > 60).length, 'windows'),
      figure(name('not_done'), r.expected - r.delays.length, 'windows'),
      figure(`jobs.ticks_temporal_cpu_${label}pct@${n}`, r.temporalCpu, '% of a core'),
    );
    log(
      `ticks@${n}${label ? ` (${label.slice(0, -1)})` : ''}: ${r.delays.length} of ${r.expected} done; after the tick p50 ${p(50, r.delays).toFixed(1)} s, p99 ${p(99, r.delays).toFixed(1)} s, max ${Math.max(...r.delays).toFixed(1)} s; after the close p50 ${p(50, r.afterClose).toFixed(1)} s, max ${Math.max(...r.afterClose).toFixed(1)} s; Temporal ${r.temporalCpu.toFixed(0)}% of a core; RSS ${Math.round(r.rssMb)} MiB`,
    );
  };
  for (const n of sizes) {
    const spread = await tickRun(n, cycles, true);
    if (n === sizes.at(-1)) {
      const exact = await tickRun(n, cycles, false);
      add(n, 'unspread_', exact);
      add(n, '', spread, exact);
    } else add(n, '', spread);
  }
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const only = process.argv[2];
  const figures = [
    ...(only === 'ticks' ? [] : await jobsFigures()),
    ...(only === 'costs' ? [] : await tickFigures()),
  ];
  console.log(JSON.stringify(figures, null, 2));
  if (!QUICK) {
    // Merged into bench/results.json, replacing the same figures of an earlier run.
    const file = new URL('../bench/results.json', import.meta.url);
    const saved = JSON.parse(await readFile(file, 'utf8')) as { results: Figure[] };
    const names = new Set(figures.map((f) => f.name));
    saved.results = [...saved.results.filter((f) => !names.has(f.name)), ...figures];
    await writeFile(file, JSON.stringify(saved, null, 2) + '\n');
  }
  process.exit(0);
}
