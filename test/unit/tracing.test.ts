// Which OTEL_* environments turn tracing on, and the errors that name a variable it cannot honour.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tracingSettings } from '../../workers/tracing.js';

test('off with no OTEL_* variables, with OTEL_TRACES_EXPORTER=none and with OTEL_SDK_DISABLED=true', () => {
  assert.equal(tracingSettings({}), null);
  assert.equal(tracingSettings({ OTEL_SERVICE_NAME: 'x' }), null, 'a service name alone exports nothing');
  assert.equal(
    tracingSettings({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }),
    null,
  );
  assert.equal(tracingSettings({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }), null);
});

test('on with an OTLP endpoint, or an exporter named in OTEL_TRACES_EXPORTER', () => {
  assert.deepEqual(tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), { exporter: 'otlp' });
  assert.deepEqual(tracingSettings({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }), {
    exporter: 'otlp',
  });
  assert.deepEqual(tracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' }), { exporter: 'otlp' });
  assert.deepEqual(tracingSettings({ OTEL_TRACES_EXPORTER: 'console' }), { exporter: 'console' });
  assert.deepEqual(
    tracingSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    }),
    { exporter: 'otlp' },
  );
});

test('an exporter or protocol it does not have is refused, naming the variable', () => {
  assert.throws(
    () => tracingSettings({ OTEL_TRACES_EXPORTER: 'zipkin' }),
    /^Error: OTEL_TRACES_EXPORTER: "zipkin"/,
  );
  assert.throws(
    () =>
      tracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }),
    /^Error: OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported.*http\/json/,
  );
  assert.throws(
    () =>
      tracingSettings({
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      }),
    /^Error: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http\/protobuf"/,
  );
});
