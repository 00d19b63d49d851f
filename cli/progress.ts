// The progress a long command shows while it waits for a workflow: asked every beat, one question
// at a time (with no worker polling, a query waits until one comes), and none left in flight when
// the command returns and closes its connection.
import type { Client } from '@temporalio/client';

export interface Asking {
  /** Stops asking: aborts the question in flight and resolves once it has settled. */
  stop(): Promise<void>;
}

export function askEvery<T>(
  everyMs: number,
  ask: (signal: AbortSignal) => Promise<T>,
  onAnswer: (answer: T) => void,
): Asking {
  let stopped = false;
  // Each question has a signal of its own: the client adds an abort listener to the signal for
  // every call made under it and never removes it, so one signal for the whole command would
  // hold on to every call of a backfill that runs for hours.
  let current: AbortController | undefined;
  let last: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    if (current || stopped) return;
    const question = (current = new AbortController());
    last = (async () => {
      try {
        const answer = await ask(question.signal);
        if (!stopped) onAnswer(answer);
      } catch {
        // A question that fails (no worker yet, a server blip) is asked again at the next beat.
      } finally {
        current = undefined;
      }
    })();
  }, everyMs);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      current?.abort();
      await last;
    },
  };
}

/**
 * One call on a Temporal client, cancelled by `signal` and given up after `withinMs` whatever
 * happens. The client's gRPC retry interceptor cancels only the attempt in flight when it is
 * aborted: once a first attempt has failed (a server restart: UNAVAILABLE), the retries it
 * schedules ignore the abort, and a stop would wait for all of them (10 attempts, about 20 s;
 * a query with no worker waits 30 s per attempt). The deadline holds for every attempt.
 */
export function boundedCall<T>(
  client: Pick<Client, 'withDeadline' | 'withAbortSignal'>,
  signal: AbortSignal,
  withinMs: number,
  call: () => Promise<T>,
): Promise<T> {
  return client.withDeadline(Date.now() + withinMs, () => client.withAbortSignal(signal, call));
}
