// Failure types: the names activities and workflows fail with. Retry policies, the workflows
// that wait or alert, and the pages that explain a failure match on them, so each is typed once
// here. The names are part of the product's surface (histories, alerts): never rename one.

/** Failures an activity raises while reading or running a window. */
export const FAILURE = Object.freeze({
  unknownJob: 'UnknownJob',
  badWindow: 'BadWindow',
  windowNotClosed: 'WindowNotClosed',
  /** Retryable: closes within the clock-skew tolerance; the activity retries once it has. */
  windowNotClosedYet: 'WindowNotClosedYet',
  countMismatch: 'CountMismatch',
  badRange: 'BadRange',
  badEffect: 'BadEffect',
  /** A local window attempt found the job's attempts spent by attempts lost with their workers. */
  attemptsLost: 'AttemptsLost',
  /** An approved rerun's handler would change something else than the preview its approver saw. */
  changedSinceApproval: 'ChangedSinceApproval',
  /** The window committed, but some of its external effects are failed or unknown. */
  effectsIncomplete: 'EffectsIncomplete',
} as const);
export type FailureType = (typeof FAILURE)[keyof typeof FAILURE];

/** Failures of the effect guard (activities/effects.ts). */
export const EFFECT_FAILURE = Object.freeze({
  notSent: 'EffectNotSent',
  inProgress: 'EffectInProgress',
  rejected: 'EffectRejected',
  notConfigured: 'ChannelNotConfigured',
  unknownEffect: 'UnknownEffect',
  inDoubt: 'EffectInDoubt',
} as const);

/** Refusals of a rerun decision (workflows/rerun.ts): nothing was decided. */
export const DECISION_FAILURE = Object.freeze({
  notAnApprover: 'NotAnApprover',
  previewNotChecked: 'PreviewNotChecked',
  previewChanged: 'PreviewChanged',
  decisionNotRecorded: 'DecisionNotRecorded',
} as const);

/** Bad input: retrying cannot help, so no retry policy retries these. */
export const BAD_INPUT: readonly string[] = Object.freeze([
  FAILURE.unknownJob,
  FAILURE.badWindow,
  FAILURE.windowNotClosed,
  FAILURE.countMismatch,
  FAILURE.badRange,
]);

/** An effect the provider refused, or one no attempt may perform: retrying cannot help. */
export const EFFECT_REFUSALS: readonly string[] = Object.freeze([
  EFFECT_FAILURE.rejected,
  EFFECT_FAILURE.notConfigured,
  EFFECT_FAILURE.unknownEffect,
]);
