// tidemark's own span data inside activities: the window on the span of the activity that runs it,
// and a child span per external effect. Keys, names and outcomes only: never a request, a reply or
// an error's text. With tracing off the global tracer is OpenTelemetry's no-op: nothing is kept.
import { SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';
import { ApplicationFailure } from '@temporalio/common';
import { SPAN_ATTR } from '../contract/span-attributes.js';
import { activityContext } from './context.js';

const tracer = trace.getTracer('tidemark');

/** The failure's type (an ApplicationFailure's, else the error's name): what a span may say of it. */
const failureType = (err: unknown): string =>
  err instanceof ApplicationFailure && err.type ? err.type : err instanceof Error ? err.name : 'Error';

function runningActivity(): string | undefined {
  return activityContext()?.info.activityType;
}

async function within<T extends { outcome: string }>(
  span: Span,
  own: boolean,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  try {
    const result = await fn(span);
    span.setAttribute(SPAN_ATTR.outcome, result.outcome);
    return result;
  } catch (err) {
    span.setAttribute(SPAN_ATTR.outcome, failureType(err));
    // The activity's own span gets its status (and the redacted failure) from the interceptor.
    if (own) span.setStatus({ code: SpanStatusCode.ERROR, message: failureType(err) });
    throw err;
  } finally {
    if (own) span.end();
  }
}

/**
 * Runs `fn` on the span of the activity `name` when that is what runs (the interceptor's
 * RunActivity span), else (called from another activity, a batch) in a child span of that name;
 * labels it with `attributes` and the result's outcome, or the failure's type.
 */
export async function activitySpan<T extends { outcome: string }>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const active = trace.getActiveSpan();
  if (active && runningActivity() === name) return await within(active.setAttributes(attributes), false, fn);
  return await tracer.startActiveSpan(name, { attributes }, (span) => within(span, true, fn));
}

/** A child span of the running activity for one external effect, labelled as `fn` learns more. */
export async function effectSpan<T extends { outcome: string }>(
  key: string,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return await tracer.startActiveSpan('effect', { attributes: { [SPAN_ATTR.effectKey]: key } }, (span) =>
    within(span, true, fn),
  );
}

/** Names the effect span after the effect's channel, with the effect's job and window. */
export function labelEffect(row: { channel: string; job: string; window_key: string | null }): void {
  trace
    .getActiveSpan()
    ?.updateName(`effect ${row.channel}`)
    .setAttributes({
      [SPAN_ATTR.channel]: row.channel,
      [SPAN_ATTR.job]: row.job,
      ...(row.window_key ? { [SPAN_ATTR.windowKey]: row.window_key } : {}),
    });
}
