// The payload codec every Temporal client and worker of tidemark uses (one place: config/temporal.ts
// passes it on). Unset: payloads travel as plain JSON, as the SDK's default converter writes them.
// Set (TIDEMARK_PAYLOAD_KEYS and/or TIDEMARK_PAYLOAD_KEYS_FILE): every payload is AES-256-GCM
// encrypted, and failure messages and stack traces travel inside an encrypted payload too.
import { fileURLToPath } from 'node:url';
import type { DataConverter } from '@temporalio/common';
import { AesGcmCodec, KeylessCodec } from './aes-gcm.js';
import { payloadKeysFrom } from './keys.js';

export {
  AesGcmCodec,
  KeylessCodec,
  PayloadDecryptError,
  ENCRYPTED_ENCODING,
  KEY_ID_METADATA,
} from './aes-gcm.js';
export { payloadKeysFrom, type PayloadKeys } from './keys.js';

// Next to this module both in the source (tsx: .ts/.cts) and in dist/ (.js/.cjs).
const fromSource = import.meta.url.endsWith('.ts');
/** The failure converter the SDK require()s on the client and activity side. */
export const failureConverterPath = fileURLToPath(
  new URL(`./failure-converter.${fromSource ? 'cts' : 'cjs'}`, import.meta.url),
);
/** The one bundled into workflow code (webpack reads it as source). */
export const workflowFailureConverterPath = fileURLToPath(
  new URL(`./workflow-failure-converter.${fromSource ? 'ts' : 'js'}`, import.meta.url),
);

/** The payload codec for this environment, or undefined when no keys are configured. */
export function payloadCodecOf(env: NodeJS.ProcessEnv = process.env): AesGcmCodec | undefined {
  const keys = payloadKeysFrom(env);
  return keys && new AesGcmCodec(keys);
}

/**
 * The data converter for this environment. Without payload keys, payloads are written plain and an
 * encrypted one read fails naming its key id and TIDEMARK_PAYLOAD_KEYS (KeylessCodec).
 */
export function temporalDataConverter(env: NodeJS.ProcessEnv = process.env): DataConverter {
  const codec = payloadCodecOf(env);
  return codec ? { payloadCodecs: [codec], failureConverterPath } : { payloadCodecs: [new KeylessCodec()] };
}
