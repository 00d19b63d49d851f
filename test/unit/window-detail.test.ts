// What the window detail shows of an effect's request, and which keys name a window.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { requestSummary, windowStartOf } from '../../operator/window-detail.js';
import { defineJob } from '../../schedules/define.js';

test("an HTTP effect's request shows its method and origin only: a webhook's path or query may be its secret", () => {
  const summary = requestSummary('http', {
    method: 'POST',
    url: 'https://hooks.example.test/services/T000/B000/s3cr3t-hook?token=abc',
    body: { text: 'hello', apiKey: 'k-123' },
  });
  assert.deepEqual(summary, { method: 'POST', origin: 'https://hooks.example.test' });
  assert.doesNotMatch(JSON.stringify(summary), /s3cr3t|token=|k-123/);
});

test("an e-mail's request shows recipients, subject and attachment names, not their content", () => {
  const summary = requestSummary('email', {
    to: ['ops@example.test'],
    subject: 'report',
    text: 'body',
    attachments: [{ filename: 'a.csv', contentType: 'text/csv', contentBase64: 'YSxi' }],
  });
  assert.deepEqual(summary, { to: ['ops@example.test'], subject: 'report', attachments: ['a.csv'] });
});

test('a window is named by its key or its start, with or without a generation; anything else names none', () => {
  const job = defineJob({
    name: 'k',
    grid: 'day',
    timezone: 'Europe/Berlin',
    handler: async () => ({ input: 0, applied: 0, quarantined: 0 }),
  });
  const start = '2026-03-28T23:00:00Z';
  for (const key of [`k/${start}`, start, `k/${start}#2`, '2026-03-28T23:00:00.000Z'])
    assert.equal(windowStartOf(job, key)?.toISOString(), '2026-03-28T23:00:00.000Z', key);
  for (const key of [
    'k/2026-03-29T00:00:00Z',
    'other/2026-03-28T23:00:00Z',
    'nonsense',
    `k/${start}/rerun-1`,
    '',
  ])
    assert.equal(windowStartOf(job, key), undefined, key);
});
