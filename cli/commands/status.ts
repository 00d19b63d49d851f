// status and runs: a job's recent windows (outcome, duration, counts, effects) and run records.
import type { RunKind } from '../../db/schema.js';
import { compactedSpans, recentRuns, recentWindows } from '../../operator/overview.js';
import { isoUtc } from '../../contract/window-key.js';
import type { Command } from '../command.js';
import { positiveInt, table, UsageError } from '../context.js';

export const statusCommand: Command = {
  name: 'status',
  summary: "a job's recent windows: outcome, attempts, duration, counts, effects",
  usage: ['status <job> [--limit N] [--json]'],
  options: { limit: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    const job = ctx.job(positionals[0], 'status');
    const db = await ctx.db();
    const limit = positiveInt('limit', values.limit as string | undefined, 20);
    const json = await recentWindows(db, job.name, limit);
    // Done windows whose markers were compacted are not listed: said below, so none look lost.
    const compacted = await compactedSpans(db, job.name, 3);
    const notes = [
      ...compacted.spans.map(
        (s) => `windows from ${s.start} to ${s.end} are done (their markers were compacted)`,
      ),
      ...(compacted.total > compacted.spans.length
        ? [`and ${compacted.total - compacted.spans.length} older span(s) of done windows`]
        : []),
    ];
    return {
      json,
      lines:
        json.length === 0
          ? notes.length
            ? notes
            : [`${job.name}: no windows yet`]
          : table(
              ['WINDOW', 'STATUS', 'ATTEMPTS', 'MS', 'IN', 'APPLIED', 'ASIDE', 'EFFECTS', 'REASON'],
              json.map((r) => [
                r.window,
                r.status,
                r.attempts,
                r.durationMs,
                r.input,
                r.applied,
                r.quarantined,
                Object.entries(r.effects)
                  .map(([k, v]) => `${v} ${k}`)
                  .join(', ') || null,
                r.reason,
              ]),
            ).concat(notes),
    };
  },
};

export const runsCommand: Command = {
  name: 'runs',
  summary: "a job's run records: ticks, window attempts, backfills",
  usage: ['runs <job> [--kind tick|window|backfill|rerun] [--limit N] [--json]'],
  options: { limit: { type: 'string' }, kind: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    const job = ctx.job(positionals[0], 'runs');
    const kind = values.kind as string | undefined;
    if (kind && !['tick', 'window', 'backfill', 'rerun'].includes(kind))
      throw new UsageError(`--kind: "${kind}" is not one of tick, window, backfill, rerun`);
    const db = await ctx.db();
    const rows = await recentRuns(db, job.name, {
      ...(kind ? { kind: kind as RunKind } : {}),
      limit: positiveInt('limit', values.limit as string | undefined, 20),
    });
    const json = rows.map((r) => ({
      kind: r.kind,
      window: r.window_start ? isoUtc(r.window_start) : null,
      attempt: r.attempt,
      workflowId: r.workflow_id,
      startedAt: isoUtc(r.started_at),
      durationMs: r.duration_ms,
      outcome: r.outcome,
      reason: r.reason,
    }));
    return {
      json,
      lines: table(
        ['KIND', 'WINDOW', 'ATTEMPT', 'STARTED', 'MS', 'OUTCOME', 'REASON'],
        json.map((r) => [r.kind, r.window, r.attempt, r.startedAt, r.durationMs, r.outcome, r.reason]),
      ),
    };
  },
};
