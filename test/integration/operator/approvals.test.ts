// The approvals list asks each pending rerun request's workflow for its state. With no worker to
// answer, it shows the request without a preview after a few seconds, and leaves no call open: a
// query still running would outlive the page's request, and on shutdown its retry on the closed
// connection would end the web process with an uncaught error.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { pendingApprovals } from '../../../operator/reruns.js';
import { createTestDb, type TestDb } from '../../helpers/db.js';
import { queryFrontend } from '../../helpers/query-frontend.js';

let t: TestDb;
before(async () => {
  t = await createTestDb();
});
after(async () => t?.drop());

test('a pending request no worker answers for is listed without a preview, and its query is not left open', async (c) => {
  // A Temporal frontend that takes queries and never answers them, as with no worker polling.
  const open = new Set<number>();
  let calls = 0;
  const client = await queryFrontend(c, (call) => {
    const id = ++calls;
    open.add(id);
    call.on('cancelled', () => open.delete(id));
  });
  await t.db
    .insertInto('rerun_requests')
    .values({
      workflow_id: 'rerun:sales/2026-03-02T10:00:00Z:1',
      job: 'sales',
      window_start: new Date('2026-03-02T10:00:00Z'),
      generation: 1,
      reason: 'late orders',
      requested_by: 'alice',
      status: 'pending',
    })
    .execute();

  const listed = await pendingApprovals(client, t.db);
  assert.deepEqual(
    listed.map((a) => [a.request, a.preview, a.previewNote]),
    [['rerun:sales/2026-03-02T10:00:00Z:1', null, 'no worker answered (is one running?)']],
  );
  assert.equal(calls, 1);
  // The client cancels a call at its deadline; the server hears of it a moment later.
  for (let i = 0; i < 500 && open.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual([...open], [], 'no query is left open once the list is returned');
});
