// The page's overview, read once for all its viewers and sent as what changed. While anyone has the
// page open, one reader takes a snapshot every interval; each open stream gets the whole state once,
// then only the rows that changed since the version it has. Ten viewers cost what one does, and a
// viewer of a thousand jobs is sent the few that moved, not the thousand.

/** A snapshot: the jobs' rows (keyed by `job`) and the rest of the page's state. */
export interface Snapshot {
  jobs: { job: string }[];
}

interface Version {
  n: number;
  /** Each job's row as JSON, in the catalog's order. */
  rows: Map<string, string>;
  /** Everything but the jobs, as JSON, key by key. */
  rest: Map<string, string>;
  /** The version `changed` is relative to (0: none, the version is sent whole). */
  base: number;
  /** What changed since `base`: the jobs' rows and the other keys. */
  changed: { jobs: string[]; rest: string[] };
}

/** What a stream writes next: the whole state, or what changed since the version it has. */
export type Update = { version: number; event: 'message' | 'changes'; data: string };

/** How long one reading of the overview may take before the streams are ended. */
export const READING_TIMEOUT_MS = 20_000;

export interface OverviewHub {
  /** The next update after `since` (0: none yet), or null when nothing changed within `waitMs`. */
  next(since: number, waitMs: number): Promise<Update | null>;
  /** A viewer came or went: the reader runs while there is one. */
  join(): () => void;
}

const fullOf = (v: Version) =>
  `{"jobs":[${[...v.rows.values()].join(',')}]${[...v.rest].map(([k, json]) => `,${JSON.stringify(k)}:${json}`).join('')}}`;

/**
 * `read` is given `timeoutMs` (a Temporal call or a statement that never answers): past it, the
 * waiting streams end as on a failure, and the next reading starts on time.
 */
export function overviewHub(
  read: () => Promise<Snapshot>,
  intervalMs = 1_000,
  timeoutMs = READING_TIMEOUT_MS,
): OverviewHub {
  let current: Version | null = null;
  let failure: { n: number; error: unknown } | null = null;
  let viewers = 0;
  let running = false;
  let wake = new Set<() => void>();
  let reads = 0;

  const publish = (snapshot: Snapshot) => {
    const { jobs, ...others } = snapshot;
    const rows = new Map(jobs.map((j) => [j.job, JSON.stringify(j)]));
    const rest = new Map(
      Object.entries(others as Record<string, unknown>).map(([k, v]) => [k, JSON.stringify(v)]),
    );
    const before = current;
    const changed = {
      jobs: [...rows].filter(([k, json]) => before?.rows.get(k) !== json).map(([k]) => k),
      rest: [...rest].filter(([k, json]) => before?.rest.get(k) !== json).map(([k]) => k),
    };
    // A job added or gone (another catalog) is not a change of rows: it is sent whole.
    const sameJobs =
      !!before && before.rows.size === rows.size && changed.jobs.every((k) => before.rows.has(k));
    if (before && sameJobs && !changed.jobs.length && !changed.rest.length) return;
    current = { n: (before?.n ?? 0) + 1, base: sameJobs ? before.n : 0, rows, rest, changed };
  };

  async function loop() {
    running = true;
    try {
      while (viewers > 0) {
        const mine = ++reads;
        try {
          let timer: NodeJS.Timeout | undefined;
          const late = new Promise<never>((_, reject) => {
            timer = setTimeout(
              () => reject(new Error(`reading the overview took more than ${timeoutMs} ms`)),
              timeoutMs,
            );
          });
          publish(await Promise.race([read(), late]).finally(() => clearTimeout(timer)));
          failure = null;
        } catch (error) {
          failure = { n: mine, error };
        }
        const woken = wake;
        wake = new Set();
        for (const fn of woken) fn();
        if (viewers > 0) await new Promise((r) => setTimeout(r, intervalMs));
      }
    } finally {
      running = false;
      // Nobody watches: the next viewer waits for a fresh read, not one taken when the last one left.
      current = null;
    }
  }

  function updateFor(since: number): Update | null {
    if (!current || current.n === since) return null;
    if (since !== 0 && current.base === since) {
      const v = current;
      const data = JSON.stringify({
        jobs: v.changed.jobs.map((k) => JSON.parse(v.rows.get(k)!) as unknown),
        ...Object.fromEntries(v.changed.rest.map((k) => [k, JSON.parse(v.rest.get(k)!) as unknown])),
      });
      return { version: v.n, event: 'changes', data };
    }
    return { version: current.n, event: 'message', data: fullOf(current) };
  }

  return {
    join() {
      viewers++;
      if (!running) void loop();
      let left = false;
      return () => {
        if (!left) viewers--;
        left = true;
      };
    },
    async next(since, waitMs) {
      const now = updateFor(since);
      if (now) return now;
      const seenFailure = failure;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wake.delete(done);
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        wake.add(done);
      });
      if (failure && failure !== seenFailure) throw failure.error;
      return updateFor(since);
    },
  };
}
