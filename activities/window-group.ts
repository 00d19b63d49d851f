// A group of a batch's windows in one transaction: the claims of all of them in one statement, each
// claimed window's handler and what its commit records (effects, alerts, notices), then the
// finishes of all of them in one statement carrying the COMMIT. About one round trip a window
// besides its handler's, where a transaction of its own costs three. Each window gets what its own
// transaction would give it: the ledger's claim decides it, its run record, counts and watermark
// commit with its effect. A failure anywhere rolls the whole group back (nothing of it is
// committed); the batch then runs its windows one transaction each, so that a failure is recorded,
// retried and alerted as the failing window's alone.
import type { WindowInput, WindowResult } from '../contract/workflows.js';
import { finishWindows, type WindowRef } from '../db/ledger.js';
import type { WindowCounts } from '../schedules/job.js';
import { attemptInfo } from './context.js';
import { CRASH_POINT, reached } from './crash-points.js';
import type { ActivityDeps } from './deps.js';
import { windowCommit } from './window-commit.js';
import { resolveWindow } from './window-input.js';
import { inGroupTransaction } from './window-transaction.js';

export function windowGroups(deps: ActivityDeps) {
  const commit = windowCommit(deps);

  /**
   * Runs `inputs` (consecutive windows of one job, with one policy and trigger, none an approved
   * rerun) in one transaction. Returns the result of each window it processed, by the key its input gave; a window the
   * claim found done is not in it (its own path answers it). Throws when anything fails, and then
   * nothing of the group was committed.
   */
  async function processGroup(inputs: readonly WindowInput[]): Promise<Map<string, WindowResult>> {
    const first = inputs[0]!;
    if (inputs.some((i) => i.approved || i.job !== first.job))
      throw new Error('a group holds windows of one job, none an approved rerun');
    const ws = inputs.map((i) => resolveWindow(deps, i));
    const { attempt, workflowId, runId } = attemptInfo();
    for (const w of ws) await reached(deps, CRASH_POINT.beforeClaim, w.key);
    const meta = { trigger: first.trigger, workflowId, at: deps.now() };
    const log = (line: string) => deps.logger.info(line);
    const { done, watermark } = await inGroupTransaction(
      deps,
      ws,
      first.policy,
      meta,
      attempt,
      log,
      async (trx, claimed, runHandler) => {
        const done: {
          w: WindowRef;
          input: WindowInput;
          counts: WindowCounts;
          parts: Awaited<ReturnType<typeof commit.record>>;
          startedAt: Date;
          finishedAt: Date;
          seconds: number;
        }[] = [];
        for (const [i, w] of ws.entries()) {
          const attempts = claimed.get(w.key);
          if (attempts === undefined) continue;
          const startedAt = deps.now();
          const began = performance.now();
          const counts = await runHandler(w);
          await reached(deps, w.generation > 0 ? CRASH_POINT.inGenerationSwap : CRASH_POINT.inHandler, w.key);
          const parts = await commit.record(trx, w, counts, attempts, first.policy, { workflowId, runId });
          done.push({
            w,
            input: inputs[i]!,
            counts,
            parts,
            startedAt,
            finishedAt: deps.now(),
            seconds: (performance.now() - began) / 1000,
          });
        }
        // Nothing claimed: the transaction commits on its own (nothing was written).
        if (done.length === 0) return { done, watermark: undefined };
        const watermark = await finishWindows(
          trx,
          done.map((d) => ({
            w: d.w,
            f: { counts: d.counts, startedAt: d.startedAt, finishedAt: d.finishedAt, workflowId, attempt },
          })),
          { workflowId, attempt },
        );
        return { done, watermark };
      },
    );
    const results = new Map<string, WindowResult>();
    for (const d of done) {
      await reached(deps, CRASH_POINT.afterCommit, d.w.key);
      results.set(
        d.input.key,
        commit.processed(d.w, { ...d.parts, counts: d.counts, watermark }, attempt, d.seconds),
      );
    }
    return results;
  }

  return { processGroup };
}
