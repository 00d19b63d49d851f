// tidemark's spans inside activities, on a real OpenTelemetry SDK with an in-memory exporter: a
// window run from another activity (a batch) gets a child span of its own, failures say their type
// and nothing of their text, an effect's span is named after its channel.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { SpanStatusCode, trace } from '@opentelemetry/api';
import { node } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ApplicationFailure } from '@temporalio/common';
import { activitySpan, effectSpan, labelEffect } from '../../activities/tracing.js';

const exporter = new InMemorySpanExporter();
const provider = new node.NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
after(() => provider.shutdown());

const spans = (name: string) => exporter.getFinishedSpans().filter((s) => s.name === name);

test('a window run inside another activity (a batch) gets a child span with its window and outcome', async () => {
  const outer = trace.getTracer('test');
  await outer.startActiveSpan('RunActivity:processWindowBatch', async (batch) => {
    for (const key of ['j/2026-01-01T00:00:00Z', 'j/2026-01-01T01:00:00Z'])
      await activitySpan('processWindow', { 'tidemark.window.key': key }, async () => ({
        outcome: 'processed',
      }));
    batch.end();
  });
  const [parent] = spans('RunActivity:processWindowBatch');
  const children = spans('processWindow');
  assert.equal(children.length, 2);
  for (const child of children) {
    assert.equal(child.parentSpanId, parent!.spanContext().spanId);
    assert.equal(child.attributes['tidemark.outcome'], 'processed');
  }
  assert.deepEqual(
    children.map((c) => c.attributes['tidemark.window.key']),
    ['j/2026-01-01T00:00:00Z', 'j/2026-01-01T01:00:00Z'],
  );
  assert.equal(parent!.attributes['tidemark.window.key'], undefined, 'the batch span is not any one window');
});

test("an effect's span is named after its channel; a failure gives its type, never its text", async () => {
  await assert.rejects(
    effectSpan('j/2026-01-01T00:00:00Z:report', async () => {
      labelEffect({ channel: 'slack', job: 'j', window_key: 'j/2026-01-01T00:00:00Z' });
      throw ApplicationFailure.nonRetryable('token xoxb-secret was refused', 'EffectRejected');
    }),
    /xoxb-secret/,
  );
  const [span] = spans('effect slack');
  assert.ok(span, 'the effect span is named after its channel');
  assert.deepEqual(span.attributes, {
    'tidemark.effect.key': 'j/2026-01-01T00:00:00Z:report',
    'tidemark.effect.channel': 'slack',
    'tidemark.job': 'j',
    'tidemark.window.key': 'j/2026-01-01T00:00:00Z',
    'tidemark.outcome': 'EffectRejected',
  });
  assert.deepEqual(span.status, { code: SpanStatusCode.ERROR, message: 'EffectRejected' });
  assert.equal(span.events.length, 0, 'no exception event with the message');
  assert.doesNotMatch(JSON.stringify({ a: span.attributes, s: span.status }), /secret/);
});
