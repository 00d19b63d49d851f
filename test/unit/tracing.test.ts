// Which OTEL_* environments turn tracing on, and the errors that name a variable it cannot honour.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BasicTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { spanExporter, tracingSettings } from '../../workers/tracing.js';

test('off with no OTEL_* variables, with OTEL_TRACES_EXPORTER=none and with OTEL_SDK_DISABLED=true', () => {
  assert.equal(tracingSettings({}), null);
  assert.equal(tracingSettings({ OTEL_SERVICE_NAME: 'x' }), null, 'a service name alone exports nothing');
  assert.equal(
    tracingSettings({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    null,
  );
  assert.equal(tracingSettings({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }), null);
});

test('on with an OTLP endpoint, or an exporter named in OTEL_TRACES_EXPORTER; http/protobuf unless a protocol is set', () => {
  const protobuf = { exporter: 'otlp', protocol: 'http/protobuf' };
  assert.deepEqual(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), protobuf);
  assert.deepEqual(
    tracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }),
    protobuf,
  );
  assert.deepEqual(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' }), protobuf);
  assert.deepEqual(tracingSettings({ OTEL_TRACES_EXPORTER: 'console' }), { exporter: 'console' });
  assert.deepEqual(
    tracingSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    }),
    { exporter: 'otlp', protocol: 'http/json' },
  );
  assert.deepEqual(
    tracingSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
    }),
    protobuf,
    'the traces variable wins',
  );
});

test('spans reach a collector on loopback over OTLP/HTTP as protobuf (the default) and as JSON', async () => {
  const received: { type: string; bytes: number }[] = [];
  const collector = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === '/v1/traces')
        received.push({ type: req.headers['content-type'] ?? '', bytes: Buffer.concat(chunks).length });
      res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/json' }).end();
    });
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  try {
    for (const protocol of ['http/protobuf', 'http/json'] as const) {
      // The exporters read their endpoint from the process's environment, as in a worker.
      Object.assign(process.env, {
        OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      });
      const exporter = spanExporter(tracingSettings(process.env)!);
      const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
      provider.getTracer('test').startSpan('one').end();
      await provider.shutdown();
    }
  } finally {
    collector.close();
  }
  assert.deepEqual(
    received.map((r) => r.type),
    ['application/x-protobuf', 'application/json'],
  );
  assert.ok(received.every((r) => r.bytes > 0));
});

test('an exporter or protocol it does not have is refused, naming the variable', () => {
  assert.throws(
    () => tracingSettings({ OTEL_TRACES_EXPORTER: 'zipkin' }),
    /^Error: OTEL_TRACES_EXPORTER: "zipkin"/,
  );
  assert.throws(
    () =>
      tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    /^Error: OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported.*http\/protobuf or http\/json/,
  );
  assert.throws(
    () =>
      tracingSettings({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'thrift',
      }),
    /^Error: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "thrift"/,
  );
});
