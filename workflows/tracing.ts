// The workflow interceptors of a traced worker (its bundle takes this module only when tracing is
// on): the package's spans for runs, activities and children, and on a run's span the job, window
// key and generation it works on. Those come from the run's input, so they are the same on replay.
import { trace } from '@opentelemetry/api';
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type {
  Next,
  WorkflowExecuteInput,
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptors,
} from '@temporalio/workflow';
import { windowAttributes } from '../contract/span-attributes.js';

/** Runs inside the package's RunWorkflow span (it comes after it): labels that span. */
class WindowAttributesInterceptor implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>) {
    trace.getActiveSpan()?.setAttributes(windowAttributes(input.args[0]));
    return await next(input);
  }
}

export const interceptors = (): WorkflowInterceptors => ({
  inbound: [new OpenTelemetryInboundInterceptor(), new WindowAttributesInterceptor()],
  outbound: [new OpenTelemetryOutboundInterceptor()],
  internals: [new OpenTelemetryInternalsInterceptor()],
});
