// The progress a long command asks for while it waits: one question at a time, and none left in
// flight once it stops (the command then closes its connection, and a call still running on it
// could be retried on a closed channel after the command returned).
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { askEvery, boundedCall } from '../../cli/progress.js';
import { queryFrontend } from '../helpers/query-frontend.js';

test('progress is asked one question at a time, and each answer is passed on', async () => {
  let asked = 0;
  let inFlight = 0;
  let most = 0;
  const answers: number[] = [];
  const poll = askEvery(
    2,
    async () => {
      inFlight++;
      most = Math.max(most, inFlight);
      await sleep(15);
      inFlight--;
      return ++asked;
    },
    (n) => answers.push(n),
  );
  while (answers.length < 3) await sleep(5);
  await poll.stop();
  assert.equal(most, 1);
  assert.deepEqual(answers.slice(0, 3), [1, 2, 3]);
});

test('stopping aborts the question in flight and returns only once it has settled; none is asked after', async () => {
  let asked = 0;
  let settled = false;
  let signal: AbortSignal | undefined;
  const poll = askEvery(
    2,
    (s) => {
      asked++;
      signal = s;
      return new Promise<never>((_, reject) =>
        s.addEventListener('abort', () =>
          setTimeout(() => {
            settled = true;
            reject(new Error('cancelled'));
          }, 20),
        ),
      );
    },
    () => assert.fail('no answer comes'),
  );
  while (asked === 0) await sleep(2);
  await poll.stop();
  assert.equal(signal?.aborted, true);
  assert.equal(settled, true, 'stop() waited for the aborted question to settle');
  await sleep(20);
  assert.equal(asked, 1);
});

test('a question that fails is asked again at the next beat', async () => {
  let asked = 0;
  const answers: string[] = [];
  const poll = askEvery(
    2,
    async () => {
      if (++asked === 1) throw new Error('no worker yet');
      return 'ok';
    },
    (a) => answers.push(a),
  );
  while (answers.length === 0) await sleep(2);
  await poll.stop();
  assert.deepEqual(answers[0], 'ok');
  assert.ok(asked >= 2);
});

test('each question has a signal of its own, so what a settled one left on its signal goes with it', async () => {
  // The Temporal client adds an abort listener to the signal for every call and never removes it.
  let asked = 0;
  let most = 0;
  const poll = askEvery(
    1,
    async (s) => {
      s.addEventListener('abort', () => {});
      most = Math.max(most, getEventListeners(s, 'abort').length);
      return ++asked;
    },
    () => {},
  );
  while (asked < 5) await sleep(2);
  await poll.stop();
  assert.equal(most, 1, 'no signal collects a listener per question');
});

test('an aborted question ends by its deadline even while the client is retrying its call', async (t) => {
  // A server UNAVAILABLE for the first attempt (a restart) that never answers the retry: the
  // client's retry interceptor cancels only the attempt in flight on an abort, not its retries.
  let attempts = 0;
  const client = await queryFrontend(t, (_call, reply) => {
    if (++attempts === 1) reply({ code: grpc.status.UNAVAILABLE, details: 'restarting' });
  });
  const aborts = new AbortController();
  const question = boundedCall(client, aborts.signal, 1_500, () =>
    client.workflow.getHandle('wf').query('progress'),
  ).then(
    () => 'answered',
    () => 'settled',
  );
  while (attempts < 2) await sleep(10);
  aborts.abort();
  const outcome = await Promise.race([question, sleep(4_000).then(() => 'still waiting')]);
  assert.equal(outcome, 'settled', 'the retried call ends by its deadline');
});
