// The ids of tidemark's Temporal Schedules, and the job name of incidents that belong to no job.

export const SCHEDULE_PREFIX = 'tidemark:';
export const scheduleIdOf = (job: string): string => `${SCHEDULE_PREFIX}${job}`;
/** Incidents that belong to no job (the watch, listing schedules) use this name; no job can have it. */
export const SYSTEM_JOB = '_system';
/** The watch's schedule; job names start with a letter, so it cannot collide with one. */
export const WATCH_SCHEDULE_ID = `${SCHEDULE_PREFIX}_watch`;
