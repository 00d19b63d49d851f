// A window that a worker's clock sees as not closed yet (clock skew, under a minute) is a wait,
// never a failure: the activity asks to be retried once it has closed; when the job's retry
// policy has no attempt left for that (maximumAttempts 1), the workflow waits and calls again.
import { ActivityFailure, ApplicationFailure, sleep } from '@temporalio/workflow';
import { FAILURE } from '../contract/failures.js';

export async function waitingForClose<T>(call: () => Promise<T>, tries = 5): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await call();
    } catch (err) {
      const cause = err instanceof ActivityFailure ? err.cause : undefined;
      if (n >= tries || !(cause instanceof ApplicationFailure) || cause.type !== FAILURE.windowNotClosedYet)
        throw err;
      // The delay the activity asked for travels in its details: a failure's nextRetryDelay is
      // not decoded on the workflow side, and a guessed short sleep spends the tries too early.
      const asked = (cause.details?.[0] as { retryInMs?: unknown } | undefined)?.retryInMs;
      await sleep(typeof asked === 'number' && asked > 0 ? asked : (cause.nextRetryDelay ?? '5 seconds'));
    }
  }
}
