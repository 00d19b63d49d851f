// The rerun preview: what a rerun of a done window would change, computed on the window's real
// path (claim, bounds, guards) and rolled back, and the generation the rerun replaces.
import { ApplicationFailure } from '@temporalio/common';
import { sql, type Kysely } from 'kysely';
import { FAILURE } from '../contract/failures.js';
import { isoUtc, windowKey } from '../contract/window-key.js';
import type { PreviewInput, PreviewTable, RerunPreview } from '../contract/workflows.js';
import { inSpan } from '../db/compaction.js';
import type { WindowRef } from '../db/ledger.js';
import type { Database } from '../db/schema.js';
import type { WindowCounts } from '../schedules/job.js';
import { isAligned, windowAt } from '../schedules/windows.js';
import { attemptInfo } from './context.js';
import { policyOf, type ActivityDeps } from './deps.js';
import { badInput, redactError } from './errors.js';
import { jobOrFail } from './plan.js';
import { diff, previewDigest, snapshot } from './preview.js';
import { RolledBack, inWindowTransaction } from './window-transaction.js';

/** How long a preview waits for a row another transaction holds. */
const PREVIEW_LOCK_WAIT_MS = 10_000;
const LOCK_NOT_AVAILABLE = '55P03';

/** The generation a rerun as `generation` replaces (the newest done one before it), and the effects it sent. */
export async function replaced(db: Kysely<Database>, job: string, start: Date, generation: number) {
  const done = await db
    .selectFrom('job_windows')
    .select('generation')
    .where('job', '=', job)
    .where('window_start', '=', start)
    .where('generation', '<', generation)
    .where('status', '=', 'done')
    .execute();
  const previous = Math.max(0, ...done.map((m) => m.generation));
  const sent = await db
    .selectFrom('effects')
    .select('name')
    .where('window_key', '=', windowKey(job, start, previous))
    .execute();
  return { previous, sent: new Set(sent.map((e) => e.name)) };
}

/** What a handler's run changes, as a preview says it (the preview and the approved run alike). */
export function changeOf(
  counts: WindowCounts,
  tables: PreviewTable[] | null,
  sent: ReadonlySet<string>,
  redact: (text: string) => string,
) {
  const names = (counts.effects ?? []).map((e) => e.name);
  return {
    outcome: 'ok' as const,
    counts: { input: counts.input, applied: counts.applied, quarantined: counts.quarantined },
    tables,
    effects: {
      repeat: names.filter((n) => sent.has(n)),
      added: names.filter((n) => !sent.has(n)),
      dropped: [...sent].filter((n) => !names.includes(n)),
    },
    findings: (counts.findings ?? []).map((f) => redact(`${f.subject}: ${f.message}`)),
  };
}

/** The preview activity. */
export function previewActivity(deps: ActivityDeps) {
  const { db, logger } = deps;
  const redact = deps.redact ?? ((t: string) => t);
  /**
   * What a rerun of a done window would change: the handler run for the new generation in the
   * window's own transaction (claim, bounds, guards: the real path), the declared tables copied
   * aside before and compared after, then rolled back, also on error. Nothing commits, no effect
   * is recorded or sent, the watermark does not move; the effects the handler asked for are
   * listed against those of the generation it replaces.
   */
  async function previewWindow(input: PreviewInput): Promise<RerunPreview> {
    const job = jobOrFail(deps, input.job);
    const start = new Date(input.windowStart);
    if (Number.isNaN(start.getTime()) || !isAligned(job.grid, job.timezone, start))
      throw badInput(
        FAILURE.badWindow,
        `windowStart "${input.windowStart}" is not the start of a window of ${job.name} (grid "${job.grid.label}" in ${job.timezone})`,
      );
    const end = windowAt(job.grid, job.timezone, start).end;
    const key0 = windowKey(job.name, start);
    const marks = await db
      .selectFrom('job_windows')
      .select(['generation', 'status'])
      .where('job', '=', job.name)
      .where('window_start', '=', start)
      .execute();
    if (!marks.some((m) => m.generation === 0 && m.status === 'done') && !(await inSpan(db, job.name, start)))
      throw badInput(
        FAILURE.badWindow,
        `window ${key0} has not been processed: nothing to rerun (a tick or a backfill will process it)`,
      );
    const reserved = await db
      .selectFrom('rerun_requests')
      .select((eb) => eb.fn.max('generation').as('g'))
      .where('job', '=', job.name)
      .where('window_start', '=', start)
      .executeTakeFirst();
    const generation =
      input.generation ?? Math.max(0, Number(reserved?.g ?? 0), ...marks.map((m) => m.generation)) + 1;
    const { previous, sent } = await replaced(db, job.name, start, generation);
    const w: WindowRef = {
      job: job.name,
      start,
      end,
      generation,
      key: windowKey(job.name, start, generation),
    };
    const computedAt = isoUtc(deps.now());
    const base = {
      job: job.name,
      windowStart: isoUtc(start),
      windowEnd: isoUtc(end),
      generation,
      previous,
    };
    const finish = (p: Omit<RerunPreview, 'digest' | 'computedAt' | keyof typeof base>): RerunPreview => {
      const whole = { ...base, ...p };
      logger.info(
        `PREVIEW job=${job.name} window=${w.key} outcome=${p.outcome}${p.note ? `: ${p.note}` : ''}`,
        { job: job.name, window: w.key, generation, outcome: p.outcome },
      );
      return { ...whole, computedAt, digest: previewDigest(whole) };
    };
    const none = { repeat: [], added: [], dropped: [] };
    const refusal =
      job.noPreview ??
      (job.prepare
        ? 'it prepares its windows in steps that commit on their own before the handler, which no rollback would undo'
        : undefined);
    if (refusal)
      return finish({
        outcome: 'refused',
        note: `${job.name} is not previewed: ${refusal}`,
        tables: null,
        effects: none,
        findings: [],
      });
    const { attempt, workflowId } = attemptInfo();
    try {
      const seen = await inWindowTransaction<{ counts: WindowCounts; tables: PreviewTable[] | null }>(
        deps,
        w,
        { ...w, start: isoUtc(start), end: isoUtc(end), trigger: 'rerun', policy: policyOf(job) },
        { trigger: 'preview', workflowId, at: deps.now() },
        attempt,
        (line) => logger.info(`PREVIEW ${line}`),
        async (trx, _attempts, runHandler) => {
          // A preview does not queue behind another transaction's rows for a whole attempt: an
          // approver is waiting for it (this transaction only; it is rolled back).
          if (PREVIEW_LOCK_WAIT_MS < policyOf(job).startToCloseTimeoutMs)
            await sql`select set_config('lock_timeout', ${String(PREVIEW_LOCK_WAIT_MS)}, true)`.execute(trx);
          const before = job.writes ? await snapshot(trx, job.writes, { job: job.name, start, key0 }) : null;
          const counts = await runHandler();
          const tables = before ? await diff(trx, before, redact) : null;
          throw new RolledBack({ counts, tables });
        },
      );
      if (!seen)
        return finish({
          outcome: 'refused',
          note: `generation ${generation} of ${key0} has run already`,
          tables: null,
          effects: none,
          findings: [],
        });
      return finish(changeOf(seen.counts, seen.tables, sent, redact));
    } catch (err) {
      if (err instanceof ApplicationFailure && err.type === FAILURE.windowNotClosedYet) throw err;
      // Rows held by another transaction (a run of this job) say nothing about the rerun: retried.
      if ((err as { code?: unknown }).code === LOCK_NOT_AVAILABLE)
        throw ApplicationFailure.retryable(
          `rows the handler writes were locked by another transaction for ${PREVIEW_LOCK_WAIT_MS / 1000} s (a run of ${job.name} in progress?): ${redactError(err, redact)}`,
          'PreviewLocked',
        );
      return finish({
        outcome: 'failed',
        note: redactError(err, redact),
        tables: null,
        effects: none,
        findings: [],
      });
    }
  }
  return previewWindow;
}
