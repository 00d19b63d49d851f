// trigger, pause and resume: a job's schedule, by hand.
import { ScheduleNotFoundError } from '@temporalio/client';
import { scheduleIdOf } from '../../contract/schedule-ids.js';
import type { Command } from '../command.js';
import { UsageError, type CliContext } from '../context.js';
import { noWorkerNote } from '../pollers.js';

async function schedule(ctx: CliContext, name: string | undefined, command: string) {
  const job = ctx.job(name, command);
  const handle = (await ctx.client()).schedule.getHandle(scheduleIdOf(job.name));
  try {
    return { job, handle, state: (await handle.describe()).state };
  } catch (err) {
    if (err instanceof ScheduleNotFoundError)
      throw new Error(`job ${job.name} has no schedule yet: run "tidemark schedules sync"`);
    throw err;
  }
}

export const triggerCommand: Command = {
  name: 'trigger',
  summary: "fire a job's tick now (its closed windows start; nothing runs twice)",
  usage: ['trigger <job> [--json]'],
  options: {},
  async run(ctx, { positionals }) {
    const { job, handle } = await schedule(ctx, positionals[0], 'trigger');
    await handle.trigger();
    const idle = await noWorkerNote(await ctx.client(), ctx.config.TIDEMARK_TASK_QUEUE, 'its tick');
    return {
      json: { job: job.name, triggered: true, ...(idle ? { noWorker: idle } : {}) },
      lines: [
        `tick of ${job.name} fired; its runs show as ${job.name}/tick-<time> in the Web UI`,
        ...(idle ? [idle] : []),
      ],
    };
  },
};

export const pauseCommand: Command = {
  name: 'pause',
  summary: "pause a job's schedule (windows keep closing; they are caught up on resume)",
  usage: ['pause <job> --reason TEXT [--json]'],
  options: { reason: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    const reason = values.reason as string | undefined;
    if (!reason?.trim())
      throw new UsageError('pause: --reason is required (it is shown to everyone who looks at the job)');
    const { job, handle, state } = await schedule(ctx, positionals[0], 'pause');
    if (!state.paused) await handle.pause(reason);
    return {
      json: { job: job.name, paused: true, reason, wasPaused: state.paused },
      lines: [
        state.paused
          ? `${job.name} was paused already (${state.note ?? 'no note'})`
          : `${job.name} paused: ${reason}`,
      ],
    };
  },
};

export const resumeCommand: Command = {
  name: 'resume',
  summary: 'resume a paused job; its next tick catches up every closed window',
  usage: ['resume <job> [--reason TEXT] [--json]'],
  options: { reason: { type: 'string' } },
  async run(ctx, { positionals, values }) {
    const { job, handle, state } = await schedule(ctx, positionals[0], 'resume');
    if (state.paused) await handle.unpause((values.reason as string | undefined) ?? 'resumed from the CLI');
    return {
      json: { job: job.name, paused: false, wasPaused: state.paused },
      lines: [state.paused ? `${job.name} resumed` : `${job.name} was not paused`],
    };
  },
};
