// The failure converter bundled into the workflow sandbox when payloads are encrypted: failure
// messages and stack traces travel in the (encrypted) encoded attributes, not in clear.
import { DefaultFailureConverter } from '@temporalio/common';

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
