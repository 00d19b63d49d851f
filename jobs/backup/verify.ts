// Verifying a backup before trusting it: the stored object streamed through every check (size,
// SHA-256, the key and GCM tag) into pg_restore --list, and the counted tables found in its table
// of contents. The verdict is recorded; a bad backup is a report with ok:false, not a throw.
import type { Readable, Transform } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { record } from './backup-checks.js';
import { chain, checkedStream, type Progress } from './checked-stream.js';
import type { BackupRecord } from './listing.js';
import { feedRestore } from './pg.js';
import type { BackupJob } from './registry.js';
import { BackupCheckError } from './streams.js';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface VerifyReport {
  ok: boolean;
  backup: BackupRecord;
  durationMs: number;
  checks: Check[];
}

/** A verification stopped before its end (its signal aborted): no verdict, nothing recorded. */
export class VerifyAbortedError extends Error {
  readonly code = 'VERIFY_ABORTED';
}

/** Streams a backup through every check and records the result; a bad backup is ok:false, not a throw. */
export async function verifyBackup(
  db: Kysely<Database>,
  bj: BackupJob,
  rec: BackupRecord,
  opts: { trigger?: string; onProgress?: Progress; signal?: AbortSignal } = {},
): Promise<VerifyReport> {
  const started = Date.now();
  const checks: Check[] = [];
  const fail = (name: string, detail: string) => checks.push({ name, ok: false, detail });
  let stages: (Readable | Transform)[] | undefined;
  try {
    stages = await checkedStream(bj, rec, (n) => opts.onProgress?.(n, rec.bytes), opts.signal);
  } catch (err) {
    // Stopped while waiting for the storage's first byte: no verdict either.
    if (opts.signal?.aborted) throw new VerifyAbortedError(`verification of ${rec.windowKey} was stopped`);
    fail('read', (err as Error).message);
  }
  if (stages) {
    checks.push({ name: 'read', ok: true, detail: rec.location });
    const fed = await feedRestore(chain(stages, opts.signal), ['--list']);
    // Stopped (the page's browser went away): no verdict on the backup, so nothing is recorded.
    if (opts.signal?.aborted) throw new VerifyAbortedError(`verification of ${rec.windowKey} was stopped`);
    const e = fed.inputError;
    if (e instanceof BackupCheckError) {
      // Size, then SHA-256, then the key and the tag, all at the stream's end: a later one failing means the earlier passed.
      if (e.check !== 'size')
        checks.push({ name: 'size', ok: true, detail: `${rec.bytes} bytes as recorded` });
      if (e.check === 'gcm-tag' || e.check === 'key')
        checks.push({ name: 'sha256', ok: true, detail: `${rec.sha256} as recorded` });
      fail(e.check, e.message);
    } else if (e) fail('read', e.message);
    else {
      checks.push(
        { name: 'size', ok: true, detail: `${rec.bytes} bytes as recorded` },
        { name: 'sha256', ok: true, detail: `${rec.sha256} as recorded` },
      );
      if (rec.encrypted)
        checks.push({ name: 'gcm-tag', ok: true, detail: `authentic, key ${rec.keyId ?? '(not recorded)'}` });
      if (fed.code !== 0) fail('toc', `pg_restore --list exited with ${fed.code}: ${fed.stderr}`);
      else {
        const entries = [...fed.stdout.matchAll(/TABLE DATA (\S+) (\S+) /g)];
        const data = new Set(entries.flatMap((m) => [`${m[1]}.${m[2]}`, m[2]!]));
        checks.push({
          name: 'toc',
          ok: true,
          detail: `pg_restore --list: ${entries.length} table(s) with data`,
        });
        const missing = Object.keys(rec.tableCounts).filter((t) => !data.has(t));
        if (missing.length) fail('tables', `no data in the dump for ${missing.join(', ')}`);
        else
          checks.push({
            name: 'tables',
            ok: true,
            detail: `${Object.keys(rec.tableCounts).length} counted table(s) present`,
          });
      }
    }
  }
  const report = { ok: checks.every((c) => c.ok), backup: rec, durationMs: Date.now() - started, checks };
  await record(db, rec, 'verify', opts.trigger ?? 'cli', report.ok, summary(checks), report.durationMs);
  return report;
}

function summary(checks: Check[]): string {
  const bad = checks.filter((c) => !c.ok);
  return bad.length
    ? bad.map((c) => `${c.name}: ${c.detail}`).join('; ')
    : `${checks.map((c) => c.name).join(', ')} ok`;
}
