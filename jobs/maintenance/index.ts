// Job kind "maintenance": cache cleanup in Redis, log rotation, old temporary files, expired
// sessions in PostgreSQL. Each task reports what it removed; each is safe to run twice.
import { sql } from 'kysely';
import type { JobSpec, WindowHandler } from '../../schedules/job.js';
import { isoUtc } from '../../contract/window-key.js';
import { cleanTemp, rotateLog, type LogRotation, type TempCleanup } from './files.js';
import { cleanRedis, type RedisCleanup } from './redis-cache.js';

export interface SessionCleanup {
  /** Table in the ledger database, optionally schema-qualified. */
  table: string;
  /** Rows whose expiry is before the window's end are removed, in the window's transaction. */
  expiresColumn: string;
}

export interface MaintenanceOptions extends Omit<JobSpec, 'handler' | 'seed'> {
  redis?: RedisCleanup[];
  logs?: LogRotation[];
  temp?: TempCleanup[];
  sessions?: SessionCleanup[];
}

export function maintenance(opts: MaintenanceOptions): JobSpec {
  const { redis = [], logs = [], temp = [], sessions = [], ...spec } = opts;
  const handler: WindowHandler = async ({ trx, window }) => {
    const stamp = isoUtc(window.start).replace(/[-:]/g, '');
    const report: Record<string, unknown> = {};
    let candidates = 0;
    let removed = 0;
    for (const s of sessions) {
      const r =
        await sql`delete from ${sql.id(...s.table.split('.'))} where ${sql.id(s.expiresColumn)} < ${window.end}`.execute(
          trx,
        );
      const n = Number(r.numAffectedRows ?? 0);
      report[`sessions:${s.table}`] = { removed: n };
      candidates += n;
      removed += n;
    }
    for (const r of redis) {
      const res = await cleanRedis(r);
      report[`redis:${r.pattern}`] = {
        scanned: res.scanned,
        removed: res.removed.length,
        keys: res.removed.slice(0, 100),
      };
      candidates += res.scanned;
      removed += res.removed.length;
    }
    for (const l of logs) {
      const res = await rotateLog(l, stamp);
      report[`logs:${l.dir}/${l.file}`] = res;
      removed += res.removed.length;
      candidates += res.removed.length;
    }
    for (const t of temp) {
      // Age is measured at the window's end, so a rerun of the window removes the same set.
      const res = await cleanTemp(t, window.end);
      report[`temp:${t.dir}`] = {
        removed: res.removed.length,
        files: res.removed.slice(0, 100),
        skippedLinks: res.skippedLinks,
      };
      candidates += res.removed.length;
      removed += res.removed.length;
    }
    return { input: candidates, applied: candidates, quarantined: 0, details: { removed, report } };
  };
  return {
    description: 'Maintenance: caches, logs, temporary files, sessions',
    ...spec,
    noPreview: 'it removes files and cache keys as it runs, which no rollback would bring back',
    handler,
  };
}
