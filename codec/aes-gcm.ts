// AES-256-GCM payload codec, in the format of Temporal's encryption samples: the whole payload
// (metadata and data, protobuf-encoded) encrypted as nonce (12 random bytes) | ciphertext | tag (16),
// metadata `encoding: binary/encrypted` and `encryption-key-id: <id>`. A payload that is not
// encrypted (written before encryption was turned on) decodes as it is.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { METADATA_ENCODING_KEY, type Payload, type PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import type { PayloadKeys } from './keys.js';

export const ENCRYPTED_ENCODING = 'binary/encrypted';
export const KEY_ID_METADATA = 'encryption-key-id';
const { Payload: PayloadProto } = proto.temporal.api.common.v1;
const NONCE = 12;
const TAG = 16;

const utf8 = (s: string) => new TextEncoder().encode(s);
const text = (b: Uint8Array | null | undefined) => (b ? Buffer.from(b).toString('utf8') : undefined);

/** A payload the codec cannot decrypt; the message names the key id, never a key. */
export class PayloadDecryptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PayloadDecryptError';
  }
}

export class AesGcmCodec implements PayloadCodec {
  constructor(private readonly keys: PayloadKeys) {}

  /** The id of the key new payloads are encrypted with. */
  get currentKeyId(): string {
    return this.keys.current.id;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    const { id, key } = this.keys.current;
    return payloads.map((p) => {
      const nonce = randomBytes(NONCE);
      const cipher = createCipheriv('aes-256-gcm', key, nonce);
      const plain = PayloadProto.encode(p).finish();
      const data = Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return {
        metadata: { [METADATA_ENCODING_KEY]: utf8(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: utf8(id) },
        data: new Uint8Array(data),
      };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((p) => {
      if (text(p.metadata?.[METADATA_ENCODING_KEY]) !== ENCRYPTED_ENCODING) return p;
      const id = text(p.metadata?.[KEY_ID_METADATA]);
      if (!id)
        throw new PayloadDecryptError(
          `an encrypted payload has no ${KEY_ID_METADATA} metadata, so no key can decrypt it`,
        );
      const entry = this.keys.byId.get(id);
      if (!entry)
        throw new PayloadDecryptError(
          `payload encrypted with key id ${JSON.stringify(id)}, which is not configured: add that key (id:base64) to TIDEMARK_PAYLOAD_KEYS (or TIDEMARK_PAYLOAD_KEYS_FILE) after the current one`,
        );
      const data = p.data ?? new Uint8Array();
      if (data.length < NONCE + TAG)
        throw new PayloadDecryptError(`payload encrypted with key id ${JSON.stringify(id)} is truncated`);
      const decipher = createDecipheriv('aes-256-gcm', entry.key, data.subarray(0, NONCE));
      decipher.setAuthTag(data.subarray(data.length - TAG));
      let plain: Buffer;
      try {
        plain = Buffer.concat([decipher.update(data.subarray(NONCE, data.length - TAG)), decipher.final()]);
      } catch {
        throw new PayloadDecryptError(
          `payload encrypted with key id ${JSON.stringify(id)} failed authentication: it was altered, or the key configured as ${JSON.stringify(id)} is not the one it was encrypted with`,
        );
      }
      return PayloadProto.decode(plain) as Payload;
    });
  }
}

/**
 * The codec of a process without payload keys: it writes plain payloads, and an encrypted one it meets
 * fails with its key id and the setting to fix, instead of the payload converter's bare "Unknown
 * encoding: binary/encrypted".
 */
export class KeylessCodec implements PayloadCodec {
  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads;
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    for (const p of payloads)
      if (text(p.metadata?.[METADATA_ENCODING_KEY]) === ENCRYPTED_ENCODING)
        throw new PayloadDecryptError(
          `payload encrypted with key id ${JSON.stringify(text(p.metadata?.[KEY_ID_METADATA]) ?? '')}, but this process has no payload keys: set TIDEMARK_PAYLOAD_KEYS (or TIDEMARK_PAYLOAD_KEYS_FILE) to the keys the workers use`,
        );
    return payloads;
  }
}
