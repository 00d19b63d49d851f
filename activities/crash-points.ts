// Named crash points: test seams where the fault suite kills a worker (SIGKILL) to prove that
// no window or effect is lost or repeated whatever instant a process dies at. They are reached
// only through the injected `deps.hooks.crashPoint`; production wiring never installs it, so
// in production each is one optional call that does nothing.

export const CRASH_POINT = Object.freeze({
  /** A window attempt resolved its window, before its transaction claims it. */
  beforeClaim: 'beforeClaim',
  /** Inside the window's transaction: the handler ran, nothing is committed yet (generation 0). */
  inHandler: 'inHandler',
  /** The window's commit (effect, done marker, watermark) happened; the activity has not completed. */
  afterCommit: 'afterCommit',
  /** An effect's begin marker is written (its claim holds), before the provider is called. */
  afterBegin: 'afterBegin',
  /** The provider accepted the effect, before its done marker is written. */
  afterProvider: 'afterProvider',
  /** An alert's delivery is claimed (its begin marker is written), before the channel is called. */
  inAlertDelivery: 'inAlertDelivery',
  /**
   * A backfill page is planned, its windows not yet started. Every page after the first is
   * planned by the run the backfill continued as new into.
   */
  backfillPage: 'backfillPage',
  /**
   * Inside a rerun's transaction: the new generation's handler replaced the previous
   * generation's contribution with its own; nothing is committed yet.
   */
  inGenerationSwap: 'inGenerationSwap',
  /**
   * In a batched backfill's batch activity: a window's transaction committed (and its outcome was
   * heartbeated), before the batch's next window.
   */
  inBatch: 'inBatch',
} as const);

export type CrashPoint = (typeof CRASH_POINT)[keyof typeof CRASH_POINT];

/** Alert deliveries are effects keyed `alert:<incident>:<event>:<channel>:<target>`. */
const isAlertDelivery = (effectKey: string): boolean => effectKey.startsWith('alert:');

/** The point an effect reaches after its begin marker: an alert's delivery, or any other effect. */
export const beginPointOf = (effectKey: string): CrashPoint =>
  isAlertDelivery(effectKey) ? CRASH_POINT.inAlertDelivery : CRASH_POINT.afterBegin;

/** The test seam as the activities' dependencies carry it (ActivityDeps.hooks.crashPoint). */
export interface CrashSeam {
  readonly hooks?: { crashPoint?: (point: CrashPoint, key: string) => Promise<void> | void };
}

/** Reports reaching `point` (for `key`) to the test seam, if one is installed. */
export async function reached(deps: CrashSeam, point: CrashPoint, key: string): Promise<void> {
  await deps.hooks?.crashPoint?.(point, key);
}
