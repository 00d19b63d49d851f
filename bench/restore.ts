// Restore probe for issue 15 (standalone, not part of `npm test` or bench/run.ts):
//   node --import tsx bench/restore.ts [rows=1500000]
// What the checks of a restore cost. Seeds a source database, backs it up with the real job
// (encrypted, to a directory), writes the plain dump once, then three times, interleaved:
// - `tidemark backups restore` (restoreBackup: the stored object streamed through size, SHA-256,
//   GCM tag and pg_restore in one transaction, row counts compared) against plain `pg_restore
//   --single-transaction` of the plain dump file into a database created just before (no check);
// - `tidemark backups verify` (verifyBackup: the same stream into pg_restore --list) against
//   `sha256sum` of the plain file followed by `pg_restore --list` of it (what a person would run).
// Medians; with the default size, merges `restore.*` figures into bench/results.json (render
// BENCHMARKS.md with `npm run bench -- --render`).
import { handlerTransaction } from '../activities/window-transaction.js';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import pg from 'pg';
import { localDestination } from '../jobs/backup/destination.js';
import { databaseBackup } from '../jobs/backup/index.js';
import { listBackups } from '../jobs/backup/listing.js';
import { writePlainDump } from '../jobs/backup/plain-dump.js';
import { backupJobOf } from '../jobs/backup/registry.js';
import { restoreBackup } from '../jobs/backup/restore.js';
import { verifyBackup } from '../jobs/backup/verify.js';
import { defineCatalog } from '../schedules/define.js';
import { createTestDb } from '../test/helpers/db.js';
import { figure, type Figure } from './figures.js';

const rows = Number(process.argv[2] ?? 1_500_000);
const runs = 3;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const secondsOf = async (fn: () => Promise<unknown> | unknown) => {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e9;
};

const [ledger, source] = await Promise.all([createTestDb(), createTestDb({ migrated: false })]);
const dir = await mkdtemp(join(tmpdir(), 'tidemark-restore-bench-'));
const admin = new pg.Client({ connectionString: ledger.url });
await admin.connect();
const target = (n: string) => {
  const u = new URL(source.url);
  u.pathname = `${u.pathname}_${n}`;
  return { url: u.toString(), name: u.pathname.slice(1) };
};
const drop = (name: string) =>
  admin.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
try {
  // The source's own table, named with its schema (the test database has no search_path).
  await sql`create table public.items (id bigint primary key, label text not null, payload text not null, at timestamptz not null)`.execute(
    source.db,
  );
  await sql`insert into public.items select n, 'item ' || n, md5(n::text) || md5((n * 7)::text), now() - n * interval '1 second'
            from generate_series(1, ${rows}) n`.execute(source.db);
  process.env.TIDEMARK_BENCH_BACKUP_KEYS = `k1:${randomBytes(32).toString('base64')}`;
  const catalog = defineCatalog([
    databaseBackup({
      name: 'bench-backup',
      grid: 'day',
      timezone: 'UTC',
      database: source.url,
      destination: localDestination(dir),
      encryption: { env: 'TIDEMARK_BENCH_BACKUP_KEYS' },
      retention: { daily: 3, weekly: 0, monthly: 0 },
      tables: ['public.items'],
    }),
  ]);
  const job = catalog.get('bench-backup');
  const window = { start: new Date('2026-10-01T00:00:00Z'), end: new Date('2026-10-02T00:00:00Z') };
  await ledger.db.transaction().execute((trx) =>
    job.handler({
      ...handlerTransaction(trx, { job: job.name, start: window.start, generation: 0 }),
      job,
      window,
      key: 'bench-backup/2026-10-01T00:00:00Z',
      generation: 0,
      attempt: 1,
      log: () => undefined,
      copyRows: async () => 0,
    }),
  );
  const bj = backupJobOf(job)!;
  const [rec] = await listBackups(ledger.db, 'bench-backup');
  const plainFile = join(dir, 'plain.dump');
  await writePlainDump(bj, rec!, plainFile);
  const stored = rec!.bytes;
  const plainBytes = (await stat(plainFile)).size;
  console.log(
    `${rows} rows; backup ${(stored / 1048576).toFixed(1)} MiB stored, plain dump ${(plainBytes / 1048576).toFixed(1)} MiB`,
  );

  const checked: number[] = [];
  const bare: number[] = [];
  const verify: number[] = [];
  const manual: number[] = [];
  for (let i = 0; i < runs; i++) {
    const a = target(`a${i}`);
    checked.push(
      await secondsOf(async () => {
        const r = await restoreBackup(bj, rec!, { into: a.url });
        if (!r.ok) throw new Error(r.problem);
      }),
    );
    await drop(a.name);
    const b = target(`b${i}`);
    bare.push(
      await secondsOf(async () => {
        await admin.query(`create database ${pg.escapeIdentifier(b.name)}`);
        const r = spawnSync(
          'pg_restore',
          [
            '--no-owner',
            '--no-privileges',
            '--single-transaction',
            '--exit-on-error',
            '--dbname',
            b.url,
            plainFile,
          ],
          { encoding: 'utf8' },
        );
        if (r.status !== 0) throw new Error(r.stderr);
      }),
    );
    await drop(b.name);
    verify.push(
      await secondsOf(async () => {
        const r = await verifyBackup(ledger.db, bj, rec!, { trigger: 'bench' });
        if (!r.ok) throw new Error(JSON.stringify(r.checks));
      }),
    );
    manual.push(
      await secondsOf(() => {
        const s = spawnSync('sha256sum', [plainFile]);
        const l = spawnSync('pg_restore', ['--list', plainFile]);
        if (s.status !== 0 || l.status !== 0) throw new Error('sha256sum or pg_restore --list failed');
      }),
    );
    console.log(
      `run ${i + 1}: restore ${checked[i]!.toFixed(2)} s vs pg_restore ${bare[i]!.toFixed(2)} s; verify ${verify[i]!.toFixed(2)} s vs sha256sum + pg_restore --list ${manual[i]!.toFixed(2)} s`,
    );
  }
  const f = {
    bare: median(bare),
    checked: median(checked),
    manual: median(manual),
    verify: median(verify),
  };
  const figures: Figure[] = [
    figure('restore.backup_mib', +(stored / 1048576).toFixed(1), 'MiB'),
    figure('restore.pg_restore_s', +f.bare.toFixed(2), 's'),
    figure('restore.checked_s', +f.checked.toFixed(2), 's', { name: 'restore.pg_restore_s', value: f.bare }),
    figure('restore.manual_verify_s', +f.manual.toFixed(2), 's'),
    figure('restore.verify_s', +f.verify.toFixed(2), 's', {
      name: 'restore.manual_verify_s',
      value: f.manual,
    }),
  ];
  for (const x of figures)
    console.log(
      `${x.name} = ${x.value} ${x.unit}${x.ratio ? ` (${x.ratio.toFixed(2)}x ${x.baseline})` : ''}`,
    );
  if (process.argv[2] === undefined) {
    const file = new URL('../bench/results.json', import.meta.url);
    const saved = JSON.parse(await readFile(file, 'utf8')) as { results: Figure[] };
    saved.results = [...saved.results.filter((x) => !x.name.startsWith('restore.')), ...figures];
    await writeFile(file, JSON.stringify(saved, null, 2) + '\n');
  }
} finally {
  await admin.end();
  await rm(dir, { recursive: true, force: true });
  await Promise.all([ledger.drop(), source.drop()]);
}
