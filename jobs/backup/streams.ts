// Stream pieces of a backup: SHA-256 and size while streaming, a check of both against what was
// recorded, and AES-256-GCM encryption at rest. An encrypted backup starts with a header naming
// its key ("TMBK", version 1, the key id's length and the key id), bound to the ciphertext as
// additional authenticated data, then the 12-byte IV; the 16-byte tag is last. Backups written
// before the header existed (IV first) still decrypt, with the key their record names or the
// current one.
import { createCipheriv, createDecipheriv, createHash, randomBytes, type DecipherGCM } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import type { PayloadKey } from '../../codec/keys.js';

export class Digest extends Transform {
  private readonly hash = createHash('sha256');
  bytes = 0;
  constructor(private readonly onBytes?: (bytes: number) => void) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
    this.onBytes?.(this.bytes);
    cb(null, chunk);
  }
  hex(): string {
    return this.hash.copy().digest('hex');
  }
}

/** Which check of a stored backup failed: what `backups verify` reports. */
export class BackupCheckError extends Error {
  constructor(
    readonly check: 'size' | 'sha256' | 'gcm-tag' | 'key',
    message: string,
  ) {
    super(message);
    this.name = 'BackupCheckError';
  }
}

/** Passes the stored bytes through and fails at their end unless size and SHA-256 are the recorded ones. */
export function expectDigest(
  expected: { bytes: number; sha256: string },
  onBytes?: (bytes: number) => void,
): Digest {
  const d = new Digest(onBytes);
  d._flush = (cb) => {
    if (d.bytes !== expected.bytes)
      return cb(
        new BackupCheckError(
          'size',
          `${d.bytes} bytes stored, ${expected.bytes} recorded when it was written`,
        ),
      );
    const hex = d.hex();
    if (hex !== expected.sha256)
      return cb(
        new BackupCheckError(
          'sha256',
          `sha256 ${hex} stored, ${expected.sha256} recorded when it was written`,
        ),
      );
    cb();
  };
  return d;
}

const MAGIC = Buffer.from('TMBK');
const VERSION = 1;

function header(keyId: string): Buffer {
  const id = Buffer.from(keyId, 'utf8');
  return Buffer.concat([MAGIC, Buffer.from([VERSION, id.length]), id]);
}

export function encryptor(key: PayloadKey): Transform {
  const iv = randomBytes(12);
  const head = header(key.id);
  const cipher = createCipheriv('aes-256-gcm', key.key, iv);
  cipher.setAAD(head);
  let started = false;
  const lead = () => (started ? Buffer.alloc(0) : ((started = true), Buffer.concat([head, iv])));
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      cb(null, Buffer.concat([lead(), cipher.update(chunk)]));
    },
    flush(cb) {
      cb(null, Buffer.concat([lead(), cipher.final(), cipher.getAuthTag()]));
    },
  });
}

/**
 * The key to decrypt with: by the id in the header, or (a backup without one) undefined, when the
 * answer may be several keys to try (current first).
 */
export type KeyLookup = (id: string | undefined) => Buffer | readonly Buffer[];

/** What every pg_dump custom-format archive starts with. */
const DUMP_MAGIC = Buffer.from('PGDMP');

/**
 * Of the keys a backup without a key id may have been written with, the one under which its first
 * bytes decrypt to the archive's magic (GCM is a stream cipher: no tag is needed for that). A
 * rotation put a new key first; what it wrote earlier is under an older one. The tag still decides.
 */
function legacyKey(keys: readonly Buffer[], iv: Buffer, start: Buffer): Buffer {
  return (
    keys.find((k) => createDecipheriv('aes-256-gcm', k, iv).update(start).equals(DUMP_MAGIC)) ?? keys[0]!
  );
}

/** Decrypts what `encryptor` wrote; fails at the end if a single byte was changed. */
export function decryptor(keyFor: KeyLookup): Transform {
  let head = Buffer.alloc(0);
  let decipher: DecipherGCM | undefined;
  let held = Buffer.alloc(0);
  // A header or key that fails is reported at the end, after the size and SHA-256 checks upstream:
  // a changed or cut-off object is what they say, not "key k9 missing". Nothing is decrypted meanwhile.
  let failed: Error | undefined;
  // The header's length once its first 6 bytes are in: 18 (IV only) for a backup without one.
  const needed = () => {
    if (head.length < 6 || !head.subarray(0, 4).equals(MAGIC)) return 12;
    return 6 + head[5]! + 12;
  };
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      let data = chunk;
      if (failed) return cb();
      if (!decipher) {
        head = Buffer.concat([head, data]);
        if (head.length < 6 || head.length < needed()) return cb();
        try {
          const n = needed();
          if (n === 12) {
            const keys = [keyFor(undefined)].flat();
            // Several keys to choose from: wait for the archive's first bytes (or the stream's end).
            if (keys.length > 1 && head.length < 12 + DUMP_MAGIC.length) return cb();
            const iv = head.subarray(0, 12);
            const key =
              keys.length > 1 ? legacyKey(keys, iv, head.subarray(12, 12 + DUMP_MAGIC.length)) : keys[0]!;
            decipher = createDecipheriv('aes-256-gcm', key, iv);
          } else {
            if (head[4] !== VERSION)
              throw new BackupCheckError('key', `encrypted backup format version ${head[4]} is not known`);
            const id = head.subarray(6, 6 + head[5]!).toString('utf8');
            const [key] = [keyFor(id)].flat();
            decipher = createDecipheriv('aes-256-gcm', key!, head.subarray(n - 12, n));
            decipher.setAAD(head.subarray(0, n - 12));
          }
          data = head.subarray(n);
        } catch (err) {
          failed = err as Error;
          return cb();
        }
      }
      const all = Buffer.concat([held, data]);
      held = all.subarray(Math.max(0, all.length - 16));
      cb(null, decipher.update(all.subarray(0, Math.max(0, all.length - 16))));
    },
    flush(cb) {
      if (failed) return cb(failed);
      try {
        if (!decipher || held.length < 16)
          throw new BackupCheckError('gcm-tag', 'encrypted backup is truncated (no complete tag at its end)');
        decipher.setAuthTag(held);
        cb(null, decipher.final());
      } catch (err) {
        cb(
          err instanceof BackupCheckError
            ? err
            : new BackupCheckError(
                'gcm-tag',
                'the GCM tag does not match: the backup was changed after it was written, or this is not the key it was written with',
              ),
        );
      }
    },
  });
}
