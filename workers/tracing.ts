// OpenTelemetry tracing, configured by the standard OTEL_* environment and off unless it asks for
// it: then no tracer provider or exporter exists and nothing is intercepted. On, every process
// (worker, CLI, Slack app, dev stack) traces its client calls, and a worker its workflows and
// activities, with @temporalio/interceptors-opentelemetry; spans go out over OTLP/HTTP (protobuf or JSON).
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { diag, DiagConsoleLogger, DiagLogLevel } from '@opentelemetry/api';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as OtlpProto from '@opentelemetry/exporter-trace-otlp-proto';
import type * as Resources from '@opentelemetry/resources';
import type * as SdkNode from '@opentelemetry/sdk-node';
import type * as SdkTraceBase from '@opentelemetry/sdk-trace-base';
import type { SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type * as TemporalOtel from '@temporalio/interceptors-opentelemetry';
import type { OpenTelemetrySinks } from '@temporalio/interceptors-opentelemetry';
import type { ClientInterceptors } from '@temporalio/client';
import type { InjectedSinks, WorkerInterceptors } from '@temporalio/worker';

// The OpenTelemetry SDK, its exporters and the SDK's interceptors are loaded when tracing is on,
// not with this module: a worker without tracing (the default) would hold them in memory for
// nothing (~5 MiB resident). They are CommonJS, so required here as `import` would give them.
const load = createRequire(import.meta.url);
const otel = {
  httpExporter: () => load('@opentelemetry/exporter-trace-otlp-http') as typeof OtlpHttp,
  protoExporter: () => load('@opentelemetry/exporter-trace-otlp-proto') as typeof OtlpProto,
  resources: () => load('@opentelemetry/resources') as typeof Resources,
  sdkNode: () => load('@opentelemetry/sdk-node') as typeof SdkNode,
  traceBase: () => load('@opentelemetry/sdk-trace-base') as typeof SdkTraceBase,
  temporal: () => load('@temporalio/interceptors-opentelemetry') as typeof TemporalOtel,
};

/** The workflow interceptors module that a traced worker's bundle includes. */
export const workflowTracingModule = fileURLToPath(
  // workflows/tracing.ts in the source tree, dist/workflows/tracing.js in the installed package.
  new URL(`../workflows/tracing.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

const EXPORTERS = Object.freeze({ otlp: 'otlp', console: 'console' } as const);
type ExporterName = (typeof EXPORTERS)[keyof typeof EXPORTERS];

/** OTLP over HTTP, as protobuf (the OTLP default) or JSON. */
const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
type Protocol = (typeof PROTOCOLS)[number];

export interface TracingSettings {
  readonly exporter: ExporterName;
  /** For the OTLP exporter: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf. */
  readonly protocol?: Protocol;
}

/**
 * What the environment asks for, or null for no tracing. On when OTEL_TRACES_EXPORTER names an
 * exporter, or (unset) an OTLP endpoint is given; off with OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none. An error names the variable and what it accepts.
 */
export function tracingSettings(env: NodeJS.ProcessEnv): TracingSettings | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return null;
  const named = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const exporter = named || (endpoint ? EXPORTERS.otlp : 'none');
  if (exporter === 'none') return null;
  if (exporter !== EXPORTERS.otlp && exporter !== EXPORTERS.console)
    throw new Error(`OTEL_TRACES_EXPORTER: "${named}" is not supported; use one of otlp, console, none`);
  if (exporter === EXPORTERS.console) return { exporter };
  const protocol = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL)?.trim();
  if (!protocol) return { exporter, protocol: 'http/protobuf' };
  if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
    const variable = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
      ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
    throw new Error(
      `${variable}: "${protocol}" is not supported; tidemark sends OTLP over HTTP: set it to http/protobuf or http/json (or leave it unset: http/protobuf)`,
    );
  }
  return { exporter, protocol: protocol as Protocol };
}

/** The span exporter the settings name; the OTLP ones read endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*. */
export function spanExporter(settings: TracingSettings): SpanExporter {
  if (settings.exporter === EXPORTERS.console) return new (otel.traceBase().ConsoleSpanExporter)();
  return settings.protocol === 'http/json'
    ? new (otel.httpExporter().OTLPTraceExporter)()
    : new (otel.protoExporter().OTLPTraceExporter)();
}

interface Tracing {
  readonly provider: SdkNode.node.NodeTracerProvider;
  readonly processor: SpanProcessor;
  readonly resource: Resources.Resource;
}

// One per process, built on first use from the process's environment.
let current: Tracing | null | undefined;

function build(settings: TracingSettings, env: NodeJS.ProcessEnv): Tracing {
  // The SDK's own complaints (an export that failed) go to stderr, at OTEL_LOG_LEVEL (default warn).
  const level = env.OTEL_LOG_LEVEL?.trim().toUpperCase() ?? 'WARN';
  diag.setLogger(
    new DiagConsoleLogger(),
    DiagLogLevel[level as keyof typeof DiagLogLevel] ?? DiagLogLevel.WARN,
  );
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the default name.
  const { envDetectorSync, Resource } = otel.resources();
  const resource = Resource.default()
    .merge(new Resource({ 'service.name': 'tidemark-worker' }))
    .merge(envDetectorSync.detect());
  // The exporter reads its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*, the batch
  // processor its delays and sizes from OTEL_BSP_*.
  const processor = new (otel.traceBase().BatchSpanProcessor)(spanExporter(settings));
  const provider = new (otel.sdkNode().node.NodeTracerProvider)({ resource, spanProcessors: [processor] });
  // Global: the interceptors' tracers, the context of async calls, and W3C trace propagation.
  provider.register();
  return { provider, processor, resource };
}

/** The process's tracing, or null when the environment does not ask for it. */
export function tracing(env: NodeJS.ProcessEnv = process.env): Tracing | null {
  if (current === undefined) {
    const settings = tracingSettings(env);
    current = settings ? build(settings, env) : null;
  }
  return current;
}

/** Interceptors for a Client: its workflow starts, signals and queries carry the trace. */
export function clientInterceptors(): ClientInterceptors {
  return tracing() ? { workflow: [new (otel.temporal().OpenTelemetryWorkflowClientInterceptor)()] } : {};
}

/**
 * A worker's activity and client interceptors, and the sink its workflows' spans leave by; its
 * workflow interceptors too when it bundles its workflows itself (a bundle made with
 * bundleWorkflows() has them already). Nothing when tracing is off.
 */
export function workerTracing(opts: { bundlesItself: boolean }): {
  interceptors?: WorkerInterceptors;
  sinks?: InjectedSinks<OpenTelemetrySinks>;
} {
  const t = tracing();
  if (!t) return {};
  const {
    makeWorkflowExporter,
    OpenTelemetryActivityInboundInterceptor,
    OpenTelemetryActivityOutboundInterceptor,
    OpenTelemetryWorkflowClientInterceptor,
  } = otel.temporal();
  return {
    interceptors: {
      ...(opts.bundlesItself ? { workflowModules: [workflowTracingModule] } : {}),
      client: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    sinks: { exporter: makeWorkflowExporter(t.processor, t.resource) },
  };
}

/** Modules a worker's workflow bundle takes as interceptors: none when tracing is off. */
export function workflowInterceptorModules(): string[] {
  return tracing() ? [workflowTracingModule] : [];
}

/**
 * Sends the spans still buffered and stops tracing; call once when the process ends. Spans that
 * cannot be sent (the collector is down) are lost and said on stderr, as every failed export is;
 * the process's own work is not failed for them.
 */
export async function shutdownTracing(): Promise<void> {
  await current?.provider.shutdown().catch((err: unknown) => {
    diag.warn(`tracing: the last spans were not sent (${(err as Error)?.message ?? String(err)})`);
  });
}
