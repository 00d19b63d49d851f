// The progress a long command shows while it waits for a workflow: asked every beat, one question
// at a time (with no worker polling, a query waits until one comes), and none left in flight when
// the command returns and closes its connection.

export interface Asking {
  /** Stops asking: aborts the question in flight and resolves once it has settled. */
  stop(): Promise<void>;
}

export function askEvery<T>(
  everyMs: number,
  ask: (signal: AbortSignal) => Promise<T>,
  onAnswer: (answer: T) => void,
): Asking {
  const aborts = new AbortController();
  let asking = false;
  let last: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    if (asking || aborts.signal.aborted) return;
    asking = true;
    last = (async () => {
      try {
        const answer = await ask(aborts.signal);
        if (!aborts.signal.aborted) onAnswer(answer);
      } catch {
        // A question that fails (no worker yet, a server blip) is asked again at the next beat.
      } finally {
        asking = false;
      }
    })();
  }, everyMs);
  return {
    async stop() {
      clearInterval(timer);
      aborts.abort();
      await last;
    },
  };
}
