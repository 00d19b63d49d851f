// The payload codec every Temporal client and worker of tidemark uses (one place: config/temporal.ts
// passes it on). Unset: payloads travel as plain JSON, as the SDK's default converter writes them.
import type { DataConverter } from '@temporalio/common';

/** The data converter for this environment, or undefined when no payload encryption is configured. */
export function temporalDataConverter(_env: NodeJS.ProcessEnv = process.env): DataConverter | undefined {
  return undefined;
}
