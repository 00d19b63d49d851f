// A backup job's backups for the page, and Verify. Restore stays a CLI operation (it writes into a
// database the page should not be able to reach): the page shows the exact command to run. The
// data and the checks are jobs/backup/listing.ts and verify.ts, the same code as `tidemark backups
// list|verify`.
// Registered inside the authenticated scope (web/server.ts: session, and CSRF for the POST).
import type { FastifyInstance } from 'fastify';
import { redactorFromConfig } from '../../workers/channels.js';
import { lastDrill } from '../../jobs/backup/drill.js';
import { listBackups } from '../../jobs/backup/listing.js';
import { backupJobOf, type BackupJob } from '../../jobs/backup/registry.js';
import { verifyBackup, VerifyAbortedError } from '../../jobs/backup/verify.js';
import { type Job } from '../../schedules/job.js';
import { UnknownJobError } from '../../schedules/define.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';
import { page, pageAsk } from '../paging.js';

type JobParams = { Params: { job: string } };
type BackupParams = { Params: { job: string; windowKey: string } };

/** A shell word as typed: bare when it is plain, else single-quoted (a job name may hold anything). */
const shellWord = (s: string) => (/^[\w./:@%+=,\u2026-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);

/**
 * The command that restores one backup. The target is the source's name with "_restored" on a
 * server left as "…" for the person to fill in: never the source itself (restore refuses that without
 * --overwrite-source), and never a connection string with a password. The name is a URL path again
 * (percent-encoded), as --into reads it.
 */
export function restoreCommand(job: string, windowKey: string, sourceDatabase: string): string {
  const db = decodeURIComponent(new URL(sourceDatabase).pathname.slice(1)) || 'postgres';
  return `npx tidemark backups restore ${shellWord(job)} --key ${shellWord(windowKey)} --into ${shellWord(`postgres://…/${encodeURIComponent(`${db}_restored`)}`)}`;
}

function backupJob(deps: WebDeps, name: string): { job: Job; bj: BackupJob } {
  let job: Job;
  try {
    job = deps.catalog.get(name);
  } catch (err) {
    if (err instanceof UnknownJobError) throw new HttpError(404, `job: ${err.message}`);
    throw err;
  }
  const bj = backupJobOf(job);
  if (!bj) throw new HttpError(404, `job: ${job.name} is not a backup job (it has no backups to show)`);
  return { job, bj };
}

/** Backup verifications one page process runs at once. */
export const VERIFICATIONS_AT_ONCE = 2;

export async function backupsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  const { catalog, db } = deps;
  // What the configuration knows as secret, and the password of any URL, never reach an answer.
  const redact = redactorFromConfig(deps.config);

  app.get('/api/backups', async () => ({
    jobs: catalog.jobs.filter((j) => backupJobOf(j)).map((j) => j.name),
  }));

  // In pages, newest first (web/paging.ts): a job that keeps years of dailies has thousands.
  app.get<JobParams>('/api/jobs/:job/backups', async (req, reply) => {
    const { job, bj } = backupJob(deps, req.params.job);
    const ask = pageAsk(req);
    if (
      ask.after !== undefined &&
      !(await db
        .selectFrom('backups')
        .select('window_key')
        .where('job', '=', job.name)
        .where('window_key', '=', ask.after)
        .executeTakeFirst())
    )
      throw new HttpError(400, `after: ${job.name} has no backup "${ask.after}"; start again without after`);
    const [rows, drill] = await Promise.all([
      listBackups(db, job.name, { ...ask, limit: ask.limit + 1 }),
      lastDrill(db, job.name),
    ]);
    const backups = page(req, reply, ask, rows, (b) => b.windowKey);
    return {
      job: job.name,
      backups: backups.map((b) => ({
        ...b,
        restoreCommand: restoreCommand(job.name, b.windowKey, bj.database),
      })),
      lastDrill: drill,
    };
  });

  // Verifications under way, by job and window key: a backup's whole object is read, and a second
  // reading of the same one (another tab, a reload) only doubles that. Each reads a whole object and
  // runs pg_restore: at most VERIFICATIONS_AT_ONCE of them at a time in this process.
  const verifying = new Set<string>();

  // The key is the window key `<job>/<start>` URL-encoded as one segment (or the object key).
  app.post<BackupParams>('/api/jobs/:job/backups/:windowKey/verify', async (req, reply) => {
    const { job, bj } = backupJob(deps, req.params.job);
    const key = req.params.windowKey;
    const rec = (await listBackups(db, job.name)).find((b) => b.windowKey === key || b.objectKey === key);
    if (!rec)
      throw new HttpError(
        404,
        `windowKey: ${job.name} has no live backup ${JSON.stringify(key)}; GET /api/jobs/${job.name}/backups lists them`,
      );
    const running = JSON.stringify([job.name, rec.windowKey]);
    if (verifying.has(running))
      throw new HttpError(
        409,
        `${rec.windowKey} is already being verified (from another tab or person): its result shows as the last verification when it ends`,
      );
    if (verifying.size >= VERIFICATIONS_AT_ONCE)
      throw new HttpError(
        429,
        `${verifying.size} verifications are running (at most ${VERIFICATIONS_AT_ONCE} at once: each reads a whole backup); try again when one ends`,
      );
    verifying.add(running);
    // The browser gone (tab closed, page left) stops the reading: a multi-GB object is not read
    // to its end for nobody. The response's close before it finished is the client going away.
    const gone = new AbortController();
    const onClose = () => {
      if (!reply.raw.writableFinished) gone.abort();
    };
    reply.raw.once('close', onClose);
    try {
      // A bad backup is a report with ok:false; a throw is verification that could not run at all.
      return await verifyBackup(db, bj, rec, { trigger: 'page', signal: gone.signal });
    } catch (err) {
      if (err instanceof VerifyAbortedError) throw new HttpError(499, err.message);
      throw new HttpError(
        502,
        `verify of ${rec.windowKey} could not run: ${redact(String((err as Error).message ?? err))}`,
      );
    } finally {
      verifying.delete(running);
      reply.raw.off('close', onClose);
    }
  });
}
