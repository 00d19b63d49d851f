// `tidemark backups`: what a backup job has published, checking one before trusting it,
// restoring one (into a database, or as a plain pg_dump file), and the restore drill on demand.
// A failed check, restore or drill prints what differed and exits 1.
import { resolve } from 'node:path';
import { INCIDENT_KIND } from '../../activities/alerts.js';
import { raiseNow, resolveNow } from '../../activities/direct-alerts.js';
import type { Progress } from '../../jobs/backup/checked-stream.js';
import { runDrill } from '../../jobs/backup/drill.js';
import { listBackups, pickBackup, type BackupRecord } from '../../jobs/backup/listing.js';
import { writePlainDump } from '../../jobs/backup/plain-dump.js';
import { backupJobOf, DRILL_SUBJECT, type BackupJob } from '../../jobs/backup/registry.js';
import { restoreBackup } from '../../jobs/backup/restore.js';
import { RestoreRefusedError } from '../../jobs/backup/target.js';
import { verifyBackup } from '../../jobs/backup/verify.js';
import { buildDeps } from '../../workers/deps.js';
import type { Command } from '../command.js';
import { EXIT, table, UsageError, type CliContext } from '../context.js';
import { parseWhen } from '../../operator/dates.js';

const USAGE = [
  'backups list <job> [--json]',
  'backups verify <job> [--at TIME | --key KEY] [--json]',
  'backups restore <job> (--at TIME | --key KEY | --latest) --into postgres://HOST/NEW_DB [--clean] [--overwrite-source]',
  'backups restore <job> (--at TIME | --key KEY | --latest) --to-file PATH',
  'backups drill <job>',
];

export function size(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes;
  let u = 0;
  while (n >= 1024 && u < units.length - 1) {
    n /= 1024;
    u++;
  }
  return `${u === 0 ? n : n.toFixed(1)} ${units[u]}`;
}

function backupJob(ctx: CliContext, name: string | undefined, sub: string): BackupJob {
  const job = ctx.job(name, `backups ${sub}`);
  const bj = backupJobOf(job);
  if (!bj) {
    const kinds = ctx.catalog.jobs.filter((j) => backupJobOf(j)).map((j) => j.name);
    throw new UsageError(
      `backups ${sub}: ${job.name} is not a database backup job (backup jobs: ${kinds.join(', ') || 'none'})`,
    );
  }
  return bj;
}

function selection(ctx: CliContext, bj: BackupJob, values: Record<string, unknown>, sub: string) {
  const given = ['at', 'key', 'latest'].filter((k) => values[k] !== undefined);
  if (given.length > 1)
    throw new UsageError(`backups ${sub}: give one of --at, --key, --latest (not ${given.join(' and ')})`);
  return {
    ...(values.at ? { at: parseWhen('--at', values.at as string, ctx.catalog.get(bj.name).timezone) } : {}),
    ...(values.key ? { key: values.key as string } : {}),
    given: given.length > 0,
  };
}

/** Bytes read of the total: one redrawn line on a terminal, nothing otherwise (the summary follows). */
function progress(ctx: CliContext, what: string): { onProgress: Progress; end: () => void } {
  if (!ctx.io.tty || ctx.io.json) return { onProgress: () => undefined, end: () => undefined };
  let shown = -1;
  return {
    onProgress(done, total) {
      const pct = total ? Math.floor((done / total) * 100) : 100;
      if (pct === shown) return;
      shown = pct;
      process.stderr.write(`\r${what}: ${pct}% (${size(done)} of ${size(total)})`);
    },
    end: () => void (shown >= 0 && process.stderr.write('\n')),
  };
}

const describe = (b: BackupRecord) =>
  `${b.job} ${b.windowKey} (dumped ${b.dumpedAt}, ${size(b.bytes)}, ${b.location})`;

export const backupsCommand: Command = {
  name: 'backups',
  summary: "a backup job's backups: list, verify, restore (into a database or a file), drill",
  usage: USAGE,
  options: {
    at: { type: 'string' },
    key: { type: 'string' },
    latest: { type: 'boolean' },
    into: { type: 'string' },
    'to-file': { type: 'string' },
    clean: { type: 'boolean' },
    'overwrite-source': { type: 'boolean' },
  },
  async run(ctx, { positionals, values }) {
    const [sub, name] = positionals;
    if (!sub || !['list', 'verify', 'restore', 'drill'].includes(sub))
      throw new UsageError(`backups: say list, verify, restore or drill${sub ? ` (not "${sub}")` : ''}`);
    if (positionals.length > 2)
      throw new UsageError(`backups ${sub}: one job only (got ${positionals.slice(1).join(' ')})`);
    const bj = backupJob(ctx, name, sub);
    const db = await ctx.db();
    if (sub === 'list') {
      const rows = await listBackups(db, bj.name);
      return {
        json: rows,
        lines: rows.length
          ? table(
              [
                'WINDOW',
                'DUMPED AT',
                'SIZE',
                'SHA-256',
                'ENCRYPTION',
                'LOCATION',
                'ROWS AT DUMP',
                'LAST VERIFIED',
              ],
              rows.map((b) => [
                b.windowKey,
                b.dumpedAt,
                size(b.bytes),
                b.sha256.slice(0, 16),
                b.encrypted ? `aes-256-gcm key ${b.keyId ?? '(not recorded)'}` : 'none',
                b.location,
                Object.entries(b.tableCounts)
                  .map(([t, n]) => `${t}=${n}`)
                  .join(' '),
                b.lastVerification
                  ? `${b.lastVerification.ok ? 'ok' : 'FAILED'} ${b.lastVerification.at}`
                  : 'never',
              ]),
            )
          : [`${bj.name} has no published backups yet`],
      };
    }
    if (sub === 'drill') {
      const deps = buildDeps(ctx.config, { db, catalog: ctx.catalog });
      let report: Awaited<ReturnType<typeof runDrill>>;
      try {
        report = await runDrill(db, bj, 'cli');
      } catch (err) {
        // A scratch database the drill must not touch (the source, the ledger) is the operator's to
        // fix at this terminal. A drill that cannot run at all (the scratch database down, storage
        // unreadable) failed: it alerts like one that ran and found a difference, never only an exit code.
        if (err instanceof RestoreRefusedError) throw err;
        const problem = (err as Error).message;
        await raiseNow(deps, {
          job: bj.name,
          subject: DRILL_SUBJECT,
          kind: INCIDENT_KIND.drillFailed,
          error: `restore drill could not run: ${problem}`,
        });
        return {
          json: { ok: false, problem },
          lines: [`drill of ${bj.name}: FAILED: ${problem}`, 'an incident is open for it'],
          exitCode: EXIT.failed,
        };
      }
      if (report.ok)
        await resolveNow(deps, {
          job: bj.name,
          subject: DRILL_SUBJECT,
          note: `drill of ${report.backup.windowKey} passed`,
        });
      else
        await raiseNow(deps, {
          job: bj.name,
          subject: DRILL_SUBJECT,
          kind: INCIDENT_KIND.drillFailed,
          error: `restore drill of ${report.backup.windowKey}: ${report.problem}`,
        });
      return {
        json: report,
        lines: [
          `drill of ${describe(report.backup)} into ${report.scratch}: ${report.ok ? 'passed' : 'FAILED'} in ${report.durationMs} ms`,
          ...report.counts.map((c) => `  ${c.table}: ${c.restored} restored, ${c.dumped} at dump`),
          ...(report.ok
            ? ['scratch database dropped']
            : [`  ${report.problem}`, 'an incident is open for it']),
        ],
        ...(report.ok ? {} : { exitCode: EXIT.failed }),
      };
    }
    const sel = selection(ctx, bj, values, sub);
    if (sub === 'verify') {
      if (values.into || values['to-file'] || values.clean || values['overwrite-source'])
        throw new UsageError(
          'backups verify: --into, --to-file, --clean and --overwrite-source belong to restore',
        );
      const rec = await pickBackup(db, bj.name, sel);
      const p = progress(ctx, `verifying ${rec.windowKey}`);
      const report = await verifyBackup(db, bj, rec, { trigger: 'cli', onProgress: p.onProgress });
      p.end();
      return {
        json: report,
        lines: [
          `${report.ok ? 'ok' : 'FAILED'}: ${describe(rec)}`,
          ...report.checks.map((c) => `  ${c.ok ? 'ok    ' : 'FAILED'} ${c.name.padEnd(7)} ${c.detail}`),
        ],
        ...(report.ok ? {} : { exitCode: EXIT.failed }),
      };
    }
    // restore
    if (!sel.given)
      throw new UsageError('backups restore: say which backup: --at TIME, --key KEY or --latest');
    const into = values.into as string | undefined;
    const file = values['to-file'] as string | undefined;
    if (!!into === !!file)
      throw new UsageError('backups restore: give --into postgres://... or --to-file PATH (one)');
    if (file && (values.clean || values['overwrite-source']))
      throw new UsageError('backups restore: --clean and --overwrite-source go with --into');
    if (values['overwrite-source'] && !values.clean)
      throw new UsageError(
        'backups restore: --overwrite-source needs --clean as well (the source is not empty)',
      );
    const rec = await pickBackup(db, bj.name, sel);
    const say = (line: string) => (ctx.io.json ? ctx.io.err(line) : ctx.io.out(line));
    say(`restoring ${describe(rec)}`);
    const p = progress(ctx, 'reading, checking and restoring');
    // Ctrl-C (or SIGTERM) stops the restore cleanly: pg_restore killed, what it created dropped, said.
    const ac = new AbortController();
    const stop = () => ac.abort();
    process.once('SIGINT', stop).once('SIGTERM', stop);
    const done = () => {
      process.off('SIGINT', stop).off('SIGTERM', stop);
      p.end();
    };
    if (file) {
      const written = await writePlainDump(bj, rec, resolve(file), p.onProgress, ac.signal).finally(done);
      return {
        json: { backup: rec, ...written },
        lines: [
          `wrote the plain pg_dump archive (custom format, ${size(written.bytes)}) to ${written.file}: size, sha256${rec.encrypted ? ' and GCM tag' : ''} checked`,
          `restore it with e.g. pg_restore --no-owner --dbname postgres://HOST/NEW_DB ${written.file}`,
        ],
      };
    }
    const report = await restoreBackup(bj, rec, {
      into: into!,
      clean: !!values.clean,
      overwriteSource: !!values['overwrite-source'],
      ledger: ctx.config.DATABASE_URL,
      onProgress: p.onProgress,
      signal: ac.signal,
    }).finally(done);
    return {
      json: report,
      lines: [
        `${report.ok ? 'restored' : 'FAILED'}: ${rec.windowKey} into ${report.target}${report.created ? ' (created)' : ''} in ${report.durationMs} ms`,
        ...report.counts.map(
          (c) =>
            `  ${c.table}: ${c.restored} rows restored, ${c.dumped} at dump ${c.restored === c.dumped ? 'ok' : 'DIFFERENT'}`,
        ),
        ...(report.problem ? [`  ${report.problem}`] : []),
      ],
      ...(report.ok ? {} : { exitCode: EXIT.failed }),
    };
  },
};
