// The jobs' actions: trigger, pause, resume, backfill and a rerun request. Registered by
// web/server.ts inside the authenticated scope (session and CSRF are checked there).
import { ScheduleNotFoundError, type ScheduleHandle } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { directoryOf } from '../../config/people.js';
import {
  NotAWindowStart,
  requestRerun,
  requestState,
  RequestNotRecorded,
  RequestRefused,
} from '../../operator/reruns.js';
import { scheduleIdOf } from '../../contract/schedule-ids.js';
import { windowsInRange } from '../../schedules/windows.js';
import { isoUtc } from '../../contract/window-key.js';
import { searchAttributes } from '../../contract/search-attributes.js';
import { MAX_BATCH } from '../../contract/workflows.js';
import type { WebDeps } from '../deps.js';
import { HttpError } from '../errors.js';
import { actingAs, actorOf } from '../actor.js';
import { hasRole } from '../../contract/roles.js';

/** The form fields of an action: strings (or booleans, read as "true"/"false"); anything else is a 400. */
export function stringFields(body: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [field, v] of Object.entries((body ?? {}) as Record<string, unknown>)) {
    if (typeof v !== 'string' && typeof v !== 'boolean')
      throw new HttpError(400, `field ${field}: must be a string, not ${JSON.stringify(v)}`);
    out[field] = String(v);
  }
  return out;
}

type JobAction = { Params: { job: string } };

/** The longest pause reason kept as the Temporal Schedule's note. */
export const MAX_PAUSE_REASON = 1000;

export async function jobsRoutes(app: FastifyInstance, deps: WebDeps): Promise<void> {
  const { catalog, client, config } = deps;
  const maxBackfill = config.TIDEMARK_WEB_MAX_BACKFILL_WINDOWS;
  /** Acts on a job's Temporal Schedule; one not created yet (no sync has run) is a 409 saying so. */
  const onSchedule = async (job: string, act: (h: ScheduleHandle) => Promise<void>) => {
    const name = catalog.get(job).name;
    try {
      await act(client.schedule.getHandle(scheduleIdOf(name)));
      deps.scheduleChanged(name);
    } catch (err) {
      if (!(err instanceof ScheduleNotFoundError)) throw err;
      throw new HttpError(
        409,
        `job: ${name} has no Temporal Schedule yet; create it with "tidemark schedules sync"`,
      );
    }
  };

  app.get('/api/jobs', async () => ({ jobs: (await deps.overview()).jobs }));

  app.post<JobAction>('/api/jobs/:job/trigger', async (req) => {
    stringFields(req.body);
    await onSchedule(req.params.job, (h) => h.trigger());
    return { ok: true };
  });

  app.post<JobAction>('/api/jobs/:job/pause', async (req) => {
    const body = stringFields(req.body);
    // Temporal refuses a long schedule note with a bare "Failed to patch schedule" (a 500 here).
    if ((body.reason ?? '').length > MAX_PAUSE_REASON)
      throw new HttpError(
        400,
        `reason: ${body.reason!.length} characters; say why in at most ${MAX_PAUSE_REASON} characters`,
      );
    await onSchedule(req.params.job, (h) => h.pause(body.reason || 'paused from the management page'));
    return { ok: true };
  });

  app.post<JobAction>('/api/jobs/:job/resume', async (req) => {
    stringFields(req.body);
    await onSchedule(req.params.job, (h) => h.unpause('resumed from the management page'));
    return { ok: true };
  });

  app.post<JobAction>('/api/jobs/:job/backfill', async (req) => {
    const job = catalog.get(req.params.job);
    const body = stringFields(req.body);
    const from = new Date(body.from ?? '');
    const to = new Date(body.to ?? '');
    if (Number.isNaN(from.getTime()) || Number.isNaN(to.getTime()) || !(from < to))
      throw new HttpError(400, 'from and to must be instants with from before to');
    // Optional: consecutive windows per activity (each still its own transaction); empty means one per run.
    const batchText = (body.batch ?? '').trim();
    const batch = batchText === '' ? undefined : Number(batchText);
    if (batch !== undefined && !(Number.isInteger(batch) && batch >= 1 && batch <= MAX_BATCH))
      throw new HttpError(
        400,
        `batch: ${JSON.stringify(batchText.slice(0, 40))} is not a whole number from 1 to ${MAX_BATCH} (windows per batch); leave it empty for one window per run`,
      );
    // A typo in a year must not start years of windows: past the limit, only on purpose. Counting
    // stops just past the limit, so a huge range costs nothing to refuse.
    const windows = windowsInRange(job.grid, job.timezone, from, to, maxBackfill + 1).length;
    if (windows > maxBackfill && body.allowLarge === 'true' && !hasRole(actorOf(req).roles, 'admin'))
      throw new HttpError(
        403,
        `from, to: ${isoUtc(from)} to ${isoUtc(to)} holds more than ${maxBackfill} windows of ${job.name}: a backfill that large needs the admin role; narrow the range`,
      );
    if (windows > maxBackfill && body.allowLarge !== 'true')
      throw new HttpError(
        400,
        `from, to: ${isoUtc(from)} to ${isoUtc(to)} holds more than ${maxBackfill} windows of ${job.name}; narrow the range, or send "allowLarge": true to start it anyway (the limit is TIDEMARK_WEB_MAX_BACKFILL_WINDOWS)`,
      );
    const workflowId = `${job.name}/backfill-${isoUtc(from)}-${isoUtc(to)}`;
    await client.workflow.start('backfill', {
      taskQueue: config.TIDEMARK_TASK_QUEUE,
      workflowId,
      workflowIdConflictPolicy: 'USE_EXISTING',
      args: [
        { job: job.name, from: isoUtc(from), to: isoUtc(to), concurrency: 4, ...(batch ? { batch } : {}) },
      ],
      typedSearchAttributes: searchAttributes('backfill', job.name),
      staticSummary: `backfill of ${job.name} from the management page${batch ? `, ${batch} per batch` : ''}`,
    });
    return { ok: true, workflowId };
  });

  app.post<JobAction>('/api/jobs/:job/rerun', async (req) => {
    const job = catalog.get(req.params.job);
    const body = stringFields(req.body);
    const start = new Date(body.window ?? '');
    if (Number.isNaN(start.getTime()) || !body.reason)
      throw new HttpError(400, 'window (an instant) and reason are required');
    // The requester: the signed-in person (web/actor.ts), the same name as in the CLI and Slack, so
    // they cannot approve it elsewhere.
    const { name: by, actor } = actingAs(req, body.by, directoryOf(config));
    const handle = await requestRerun(client, config, {
      job,
      windowStart: start,
      reason: body.reason,
      requestedBy: by,
      now: new Date(),
      ...(actor.verified
        ? {
            requester: {
              subject: actor.subject,
              displayName: actor.displayName,
              roles: actor.roles,
              credential: actor.credential,
            },
          }
        : {}),
    }).catch((err: unknown) => {
      throw err instanceof NotAWindowStart
        ? new HttpError(400, `window: ${err.message}: ask for ${isoUtc(err.window.start)}`)
        : err;
    });
    req.auditTarget = handle.workflowId;
    // Wait until the workers have recorded it (its generation reserved): a refusal (never
    // processed, or a rerun of the window already open) is the page's answer, not "ok".
    try {
      const state = await requestState(client, handle.workflowId, 10_000);
      return { ok: true, request: handle.workflowId, generation: state.request?.window.generation ?? null };
    } catch (err) {
      if (err instanceof RequestRefused) throw new HttpError(409, `window: ${err.message}`);
      // Asked, but no worker has recorded it yet: say so rather than fail.
      if (err instanceof RequestNotRecorded)
        return { ok: true, request: handle.workflowId, generation: null, note: err.message };
      throw err;
    }
  });
}
